package flowcontrol

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	labelLevel  = "priority_level"
	labelSchema = "flow_schema"
)

// metrics are the eru_flowcontrol_* series.
type metrics struct {
	dispatched   *prometheus.CounterVec   // level, schema
	rejected     *prometheus.CounterVec   // level, schema, reason
	waiting      *prometheus.GaugeVec     // level, schema
	executing    *prometheus.GaugeVec     // level, schema
	seatsInUse   *prometheus.GaugeVec     // level, schema
	currentLimit *prometheus.GaugeVec     // level
	nominalLimit *prometheus.GaugeVec     // level
	lowerLimit   *prometheus.GaugeVec     // level
	upperLimit   *prometheus.GaugeVec     // level
	seatDemand   *prometheus.GaugeVec     // level: smoothed demand
	waitTime     *prometheus.HistogramVec // level, schema, execute
	execTime     *prometheus.HistogramVec // level, schema

	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	ls := []string{labelLevel, labelSchema}
	m := &metrics{
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eru_flowcontrol_dispatched_requests_total",
			Help: "Requests that started executing."}, ls),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eru_flowcontrol_rejected_requests_total",
			Help: "Requests rejected, by reason: queue-full, concurrency-limit, time-out, cancelled or shutdown."},
			append(ls, "reason")),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_current_inqueue_requests",
			Help: "Requests waiting in the queues now."}, ls),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_current_executing_requests",
			Help: "Requests executing now."}, ls),
		seatsInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_current_executing_seats",
			Help: "Seats held by executing requests now."}, ls),
		currentLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_current_limit_seats",
			Help: "The level's current concurrency limit (CurrentCL), re-divided every 10 s."}, []string{labelLevel}),
		nominalLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_nominal_limit_seats",
			Help: "The level's nominal concurrency limit (NominalCL)."}, []string{labelLevel}),
		lowerLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_lower_limit_seats",
			Help: "The least the level's limit can be lent down to (NominalCL - LendableCL)."}, []string{labelLevel}),
		upperLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_upper_limit_seats",
			Help: "The most the level's limit can borrow up to (NominalCL + BorrowingCL)."}, []string{labelLevel}),
		seatDemand: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eru_flowcontrol_demand_seats_smoothed",
			Help: "The level's smoothed seat demand, the target of the last re-division."}, []string{labelLevel}),
		waitTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eru_flowcontrol_request_wait_duration_seconds",
			Help:    "Time requests spent queued; execute is false for those rejected after waiting.",
			Buckets: []float64{0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}},
			append(ls, "execute")),
		execTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eru_flowcontrol_request_execution_seconds",
			Help:    "Time requests held their seats.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, ls),
		reg: reg,
	}
	m.collectors = []prometheus.Collector{m.dispatched, m.rejected, m.waiting, m.executing, m.seatsInUse,
		m.currentLimit, m.nominalLimit, m.lowerLimit, m.upperLimit, m.seatDemand, m.waitTime, m.execTime}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("flowcontrol: registering metrics"), err)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// forgetLevel drops the per-level series of a level that no longer exists.
func (m *metrics) forgetLevel(level string) {
	for _, g := range []*prometheus.GaugeVec{m.currentLimit, m.nominalLimit, m.lowerLimit, m.upperLimit, m.seatDemand} {
		g.DeleteLabelValues(level)
	}
}
