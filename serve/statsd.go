package serve

import (
	"context"
	"strconv"
	"time"

	"github.com/alexcesaro/statsd"
)

// pushStatsd sends every node's gauges to statsd every interval until ctx
// ends. UDP sends do not wait for anyone: a dead statsd blocks and fails
// nothing.
func (d *Daemon) pushStatsd(ctx context.Context) {
	sc := d.serve.Statsd
	opts := []statsd.Option{statsd.Address(sc.Address), statsd.FlushPeriod(0),
		statsd.ErrorHandler(func(err error) { d.log.Debug("statsd", "error", err.Error()) })}
	if sc.Prefix != "" {
		opts = append(opts, statsd.Prefix(sc.Prefix))
	}
	client, err := statsd.New(opts...) // a client that cannot connect is muted, not nil
	if err != nil {
		d.log.Warn("statsd: pushing nothing until restart", "address", sc.Address, "error", err.Error())
	}
	defer client.Close()
	tick := time.NewTicker(sc.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
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
