package serve

import (
	"context"
	"strconv"
	"time"

	"github.com/alexcesaro/statsd"
)

// pushStatsd sends every node's gauges to statsd every interval until ctx
// ends. UDP sends do not wait for anyone: a dead statsd blocks and fails
// nothing. A client that could not be made (statsd was down) is made
// again on a later tick, so pushes start once statsd is up.
func (d *Daemon) pushStatsd(ctx context.Context) {
	sc := d.serve.Statsd
	opts := []statsd.Option{statsd.Address(sc.Address), statsd.FlushPeriod(0),
		statsd.ErrorHandler(func(err error) { d.log.Debug("statsd", "error", err.Error()) })}
	if sc.Prefix != "" {
		opts = append(opts, statsd.Prefix(sc.Prefix))
	}
	var client *statsd.Client
	warned := false
	defer func() {
		if client != nil {
			client.Close()
		}
	}()
	tick := time.NewTicker(sc.Interval)
	defer tick.Stop()
	for {
		if client == nil {
			c, err := statsd.New(opts...) // a client that cannot connect is muted, not nil
			if err != nil {
				c.Close()
				if !warned {
					d.log.Warn("statsd: pushing nothing until it answers; trying again every interval", "address", sc.Address, "error", err.Error())
					warned = true
				}
			} else {
				client = c
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if client == nil {
			continue
		}
		snap, err := d.nodeSamples(ctx)
		if err != nil {
			continue
		}
		for _, s := range snap.samples {
			if v, err := strconv.ParseInt(s.Value, 10, 64); err == nil {
				client.Gauge(s.Key, v)
			} else if f, err := strconv.ParseFloat(s.Value, 64); err == nil {
				client.Gauge(s.Key, f)
			}
		}
		client.Flush()
	}
}
