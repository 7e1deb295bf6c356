package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agent-context/agent-context/gate"
)

// latencyBuckets span a cached read (1 ms) to a long poll (60 s).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// requestMetrics are the host's instruments: requests and their latency by route
// template and status, errors by the contract's code, and requests in flight.
type requestMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	inFlight prometheus.Gauge
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	f := promauto.With(reg)
	return &requestMetrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: gate.MetricsNamespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests by method, route template (\"unmatched\" for unknown paths) and status; 499 = the client went away.",
		}, []string{"method", "route", "status"}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: gate.MetricsNamespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "HTTP request latency by method, route template and status.",
			Buckets: latencyBuckets,
		}, []string{"method", "route", "status"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: gate.MetricsNamespace, Subsystem: "http", Name: "errors_total",
			Help: "Error responses by route template and the contract's error code.",
		}, []string{"route", "code"}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Namespace: gate.MetricsNamespace, Subsystem: "http", Name: "requests_in_flight",
			Help: "Requests being served now.",
		}),
	}
}

// middleware counts every request once its answer is final; it runs outside the log
// middleware, which hands errors to the error handler.
func (m *requestMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		err := next(c)
		route := routeLabel(c)
		status := finalStatus(c)
		label := strconv.Itoa(status)
		m.requests.WithLabelValues(c.Request().Method, route, label).Inc()
		m.latency.WithLabelValues(c.Request().Method, route, label).Observe(time.Since(start).Seconds())
		if code := record(c).Code; code != "" && status != StatusClientClosedRequest {
			m.errors.WithLabelValues(route, code).Inc()
		}
		return err
	}
}

// finalStatus is the status the request is logged and counted under: the one
// written, except that a request whose client went away before a successful answer
// (its body broke off, or its context ended) counts as 499 whatever the server then
// wrote (or did not write).
func finalStatus(c echo.Context) int {
	resp := c.Response()
	if record(c).ClientGone ||
		errors.Is(c.Request().Context().Err(), context.Canceled) && (!resp.Committed || resp.Status >= 500) {
		return StatusClientClosedRequest
	}
	return resp.Status
}

// metricsHandler serves g in the Prometheus text format. A collector that fails (the
// database is down) is logged and left out; the rest is still served.
func metricsHandler(g prometheus.Gatherer, log *slog.Logger) echo.HandlerFunc {
	if g == nil {
		g = prometheus.NewRegistry()
	}
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{log},
	})
	return echo.WrapHandler(h)
}

// promLogger adapts slog to promhttp's logger.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("metrics collection failed", slog.String("error", fmt.Sprint(v...)))
}
