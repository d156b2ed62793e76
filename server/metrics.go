package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zidane-server/zidane/protocol"
)

// metrics are the server's Prometheus metrics, served at GET /metrics to loopback clients and to
// admin tokens (docs/security.md).
type metrics struct {
	reg         *prometheus.Registry
	connections prometheus.Gauge
	requests    *prometheus.CounterVec // by method (known methods only) and outcome
	signals     prometheus.Counter
	closes      *prometheus.CounterVec // by close code the server sent
	handler     http.Handler
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zidane_connections", Help: "Open WebSocket connections.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zidane_requests_total", Help: "JSON-RPC requests and notifications handled, by method and outcome (ok or the error code).",
		}, []string{"method", "outcome"}),
		signals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zidane_signals_published_total", Help: "ipc.signal notifications published (each is encoded once for every connection).",
		}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zidane_closes_total", Help: "Connections the server closed, by WebSocket close code.",
		}, []string{"code"}),
	}
	// Per replica (issue 25 §4): every replica serves its own figures; zidane_replica_info names
	// it (join on the scrape's instance), the lease gauge and call counters are its share.
	replica := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "zidane_replica_info", Help: "Always 1; the replica label is this process's --replica-id.",
		ConstLabels: prometheus.Labels{"replica": s.replica.ID()},
	})
	replica.Set(1)
	leases := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zidane_run_leases", Help: "Run leases this replica holds (sessions it runs or queues prompts for).",
	}, func() float64 { return float64(s.replica.Held()) })
	callsMade := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "zidane_replica_calls_made_total", Help: "Calls this replica sent to the replica owning a run (prompt, cancel, answers).",
	}, func() float64 { made, _ := s.replica.Calls(); return float64(made) })
	callsServed := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "zidane_replica_calls_served_total", Help: "Calls of other replicas this replica answered for the runs it owns.",
	}, func() float64 { _, served := s.replica.Calls(); return float64(served) })
	reg.MustRegister(replica, leases, callsMade, callsServed)
	reg.MustRegister(m.connections, m.requests, m.signals, m.closes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

// observe counts one handled request; unknown method names share one label value.
func (m *metrics) observe(method string, err error) {
	if protocol.LookupMethod(method) == nil {
		method = "unknown"
	}
	outcome := "ok"
	if err != nil {
		outcome = strconv.Itoa(toRPCError(err).Code)
	}
	m.requests.WithLabelValues(method, outcome).Inc()
}

// serveMetrics answers GET /metrics for unix-socket clients and admin tokens; others get 404 so
// the endpoint is not advertised.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.operatorOnly(w, r) {
		s.metrics.handler.ServeHTTP(w, r)
	}
}

// serveProfile serves net/http/pprof under /debug/pprof/ to the same callers as /metrics: the
// unix socket, an admin token, or anyone on the operator's --debug-listen address (docs/security.md).
func (s *Server) serveProfile(w http.ResponseWriter, r *http.Request) {
	if s.operatorOnly(w, r) {
		profileHandler(w, r)
	}
}

// profileHandler routes /debug/pprof/… to net/http/pprof.
func profileHandler(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r) // the index and the named profiles (heap, goroutine, allocs, block, mutex…)
	}
}

// operatorOnly reports whether r may read operator data (metrics, profiles); otherwise it has
// answered: 401 without a valid token, 403 for a token that is not admin, 503 when the token
// could not be checked, each saying which credentials serve.
func (s *Server) operatorOnly(w http.ResponseWriter, r *http.Request) bool {
	// Only the unix socket (mode 0600) or an admin token: a reverse proxy on the same host makes
	// every request look like a loopback peer, so loopback proves nothing (issue 7 item 12).
	// DebugHandler serves the same without a token on the operator's --debug-listen address.
	if viaUnixSocket(r) {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	tok, status := s.authenticate(r.WithContext(ctx))
	switch {
	case status != 0:
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zidane"`)
		}
		refuseAuth(w, status, "Unauthorized: "+operatorPaths)
	case tok.Scope != string(protocol.ScopeAdmin):
		plainText(w, http.StatusForbidden, "Forbidden: this token's scope is "+tok.Scope+"; "+operatorPaths)
	default:
		return true
	}
	return false
}

// operatorPaths says who may read /metrics and /debug/pprof/ (docs/security.md).
const operatorPaths = "/metrics and /debug/pprof/ answer an admin token (Authorization: Bearer <token>; mint one with `zidane-server token create --name metrics --scope admin`), the server's unix socket, or the operator's --debug-listen address."

// DebugHandler serves GET /metrics without a token, for the operator's separate --debug-listen
// address (keep it off public interfaces); every other path is 404.
func (s *Server) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if onlyGet(w, r) {
				s.metrics.handler.ServeHTTP(w, r)
			}
			return
		}
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			profileHandler(w, r)
			return
		}
		plainText(w, http.StatusNotFound, "Not found. This debug address serves GET /metrics and /debug/pprof/.")
	})
}
