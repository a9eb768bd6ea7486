// Package dashboard serves raysim's HTTP surfaces: the head's dashboard
// (version, GCS health, cluster status, the Ray Jobs REST API and the Serve REST API), the
// per-node agent's health endpoints, and the Prometheus /metrics page.
package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/internal/wsock"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
	"github.com/rayctl/rayctl/pkg/raysim/serve"
)

// Head is the head node's dashboard.
type Head struct {
	// Jobs runs submitted jobs.
	Jobs *jobs.Manager
	// Nodes is the GCS node table.
	Nodes *gcs.Table
	// Version is returned by /api/version.
	Version jobs.VersionResponse
	// GCSHealthy reports whether the GCS is serving; nil means always.
	GCSHealthy func() bool
	// Serve is the cluster's Serve instance; nil means the Serve API answers 501.
	Serve *serve.Serve
	// TokenAuth says the dashboard requires Ray's token (RAY_AUTH_MODE=token), as
	// /api/authentication_mode reports; the check itself is the server's middleware.
	TokenAuth bool
}

// Handler returns the dashboard's routes:
//
//	GET    /api/version
//	GET    /api/authentication_mode   {"authentication_mode": "token" or "disabled"}
//	GET    /api/gcs_healthz
//	GET    /api/cluster_status
//	POST   /api/jobs/                 submit
//	GET    /api/jobs/                 list
//	GET    /api/jobs/{id}             details (by submission id)
//	GET    /api/jobs/{id}/logs
//	GET    /api/jobs/{id}/logs/tail   WebSocket stream of the logs until the job ends
//	POST   /api/jobs/{id}/stop
//	DELETE /api/jobs/{id}
//	PUT    /api/serve/applications/   deploy a Serve config (every application)
//	GET    /api/serve/applications/   the applications' status
//	DELETE /api/serve/applications/   shut Serve down
func (h *Head) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "raysim dashboard: an offline stand-in for Ray's dashboard (Jobs API and health endpoints only).\n")
	})
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.Version)
	})
	mux.HandleFunc("GET /api/authentication_mode", func(w http.ResponseWriter, r *http.Request) {
		mode := "disabled"
		if h.TokenAuth {
			mode = "token"
		}
		writeJSON(w, http.StatusOK, map[string]string{"authentication_mode": mode})
	})
	mux.HandleFunc("GET /api/gcs_healthz", func(w http.ResponseWriter, r *http.Request) {
		if h.GCSHealthy != nil && !h.GCSHealthy() {
			http.Error(w, "GCS is not serving", http.StatusServiceUnavailable)
			return
		}
		writeText(w, http.StatusOK, "success")
	})
	mux.HandleFunc("GET /api/cluster_status", h.clusterStatus)
	mux.HandleFunc("POST /api/jobs/{$}", h.submit)
	mux.HandleFunc("POST /api/jobs", h.submit)
	mux.HandleFunc("GET /api/jobs/{$}", h.list)
	mux.HandleFunc("GET /api/jobs", h.list)
	mux.HandleFunc("GET /api/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := h.Jobs.Get(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /api/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		logs, err := h.Jobs.Logs(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, jobs.LogsResponse{Logs: logs})
	})
	mux.HandleFunc("GET /api/jobs/{id}/logs/tail", h.tail)
	mux.HandleFunc("PUT /api/serve/applications/{$}", h.serveDeploy)
	mux.HandleFunc("GET /api/serve/applications/{$}", h.serveOnly(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.Serve.Details())
	}))
	mux.HandleFunc("DELETE /api/serve/applications/{$}", h.serveOnly(func(w http.ResponseWriter, r *http.Request) {
		h.Serve.Delete()
		w.WriteHeader(http.StatusOK)
	}))
	mux.HandleFunc("POST /api/jobs/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		stopped, err := h.Jobs.Stop(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, jobs.StopResponse{Stopped: stopped})
	})
	mux.HandleFunc("DELETE /api/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		deleted, err := h.Jobs.Delete(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, jobs.DeleteResponse{Deleted: deleted})
	})
	return mux
}

// serveOnly answers 501 where the head has no Serve instance.
func (h *Head) serveOnly(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.Serve == nil {
			writeText(w, http.StatusNotImplemented, "Serve is not available on this raysim head")
			return
		}
		f(w, r)
	}
}

// serveDeploy is PUT /api/serve/applications/: a config Ray's schema refuses is a 400 naming the
// field, as Ray answers.
func (h *Head) serveDeploy(w http.ResponseWriter, r *http.Request) {
	h.serveOnly(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err != nil {
			writeText(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
			return
		}
		cfg, err := serve.Parse(body)
		if err != nil {
			writeText(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := h.Serve.Deploy(cfg); err != nil {
			writeText(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
	})(w, r)
}

func (h *Head) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	if err != nil {
		writeText(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
		return
	}
	req, err := jobs.ParseSubmitRequest(body)
	if err != nil {
		writeErr(w, err)
		return
	}
	resp, err := h.Jobs.Submit(req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Head) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.Jobs.List())
}

func (h *Head) tail(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.Jobs.Get(id); err != nil {
		writeErr(w, err)
		return
	}
	conn, err := wsock.Upgrade(w, r)
	if err != nil {
		return
	}
	defer conn.CloseNormal()
	gone := conn.WatchClose()
	_ = h.Jobs.Follow(id, gone, conn.WriteText)
}

// ClusterStatus is raysim's summary of the cluster, for its /metrics page.
type ClusterStatus struct {
	// Nodes lists every node, alive first.
	Nodes []gcs.NodeInfo
	// Usage maps each resource to [used, total] over the alive nodes.
	Usage map[string][2]float64
	// ActiveNodes and DeadNodes count nodes by state.
	ActiveNodes, DeadNodes int
	// Jobs counts jobs by status.
	Jobs map[jobs.Status]int
}

// Status computes the cluster summary.
func (h *Head) Status() ClusterStatus {
	nodes := h.Nodes.Nodes()
	st := ClusterStatus{Nodes: nodes, Usage: map[string][2]float64{}, Jobs: h.Jobs.Counts()}
	total, avail := h.Nodes.Totals()
	for _, n := range nodes {
		if n.State == gcs.StateAlive {
			st.ActiveNodes++
		} else {
			st.DeadNodes++
		}
	}
	for k, v := range total {
		st.Usage[k] = [2]float64{v - avail[k], v}
	}
	return st
}

// autoscalerFresh is how old an autoscaler's last report may be for the dashboard to show it (the
// autoscaler reports every pass, every few seconds).
const autoscalerFresh = time.Minute

// clusterStatus answers as Ray's dashboard does. With ?format=1 its data is {"clusterStatus": the
// `ray status` report}. Without, it is the autoscaler's status (the same report, while an autoscaler
// reports, as `ray kuberay-autoscaler` does each pass), its error and the cluster status object, which
// are null in a cluster without an autoscaler.
func (h *Head) clusterStatus(w http.ResponseWriter, r *http.Request) {
	as := h.Nodes.Autoscaler(autoscalerFresh)
	var launching map[string]int
	if as != nil {
		launching = as.Launching
	}
	report := FormatStatus(h.Nodes.Nodes(), h.Jobs.PendingDemands(), launching, time.Now())
	if r.URL.Query().Get("format") == "1" {
		writeJSON(w, http.StatusOK, map[string]any{
			"result": true,
			"msg":    "Got formatted cluster status.",
			"data":   map[string]any{"clusterStatus": strings.TrimSuffix(report, "\n")},
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"result": true,
		"msg":    "Got cluster status.",
		"data":   map[string]any{"autoscalingStatus": autoscalingStatus(as, report), "autoscalingError": nil, "clusterStatus": nil},
	})
}

func autoscalingStatus(as *gcs.AutoscalerStatus, report string) any {
	if as == nil {
		return nil
	}
	return report
}

// Agent serves a node's agent port (52365 in Ray).
type Agent struct {
	// Healthy reports whether the node's "raylet" is up (for a worker:
	// registered with a live GCS).
	Healthy func() bool
}

// Handler returns GET /api/local_raylet_healthz and GET /api/healthz, both
// "success" (200) while healthy, 503 otherwise.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		if a.Healthy != nil && !a.Healthy() {
			writeText(w, http.StatusServiceUnavailable, "raylet is not registered with a live GCS")
			return
		}
		writeText(w, http.StatusOK, "success")
	}
	mux.HandleFunc("GET /api/local_raylet_healthz", health)
	mux.HandleFunc("GET /api/healthz", health)
	return mux
}

// Metric is one gauge sample for the /metrics page.
type Metric struct {
	Name   string
	Help   string
	Labels map[string]string
	Value  float64
}

// MetricsHandler serves the samples returned by collect in the Prometheus
// text format on GET /metrics.
func MetricsHandler(collect func() []Metric) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var b strings.Builder
		seen := map[string]bool{}
		for _, m := range collect() {
			if !seen[m.Name] {
				seen[m.Name] = true
				b.WriteString("# HELP " + m.Name + " " + m.Help + "\n# TYPE " + m.Name + " gauge\n")
			}
			b.WriteString(m.Name)
			if len(m.Labels) > 0 {
				keys := make([]string, 0, len(m.Labels))
				for k := range m.Labels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				parts := make([]string, 0, len(keys))
				for _, k := range keys {
					v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(m.Labels[k])
					parts = append(parts, k+`="`+v+`"`)
				}
				b.WriteString("{" + strings.Join(parts, ",") + "}")
			}
			b.WriteString(" " + resource.FormatQuantity(m.Value) + "\n")
		}
		_, _ = io.WriteString(w, b.String())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s)
}

func writeErr(w http.ResponseWriter, err error) {
	var (
		bad *jobs.BadRequestError
		nf  *jobs.NotFoundError
	)
	switch {
	case errors.As(err, &nf):
		writeText(w, http.StatusNotFound, err.Error())
	case errors.As(err, &bad):
		writeText(w, http.StatusBadRequest, err.Error())
	default: // as in Ray: a taken submission_id, deleting a job still running, a body that is no JSON
		writeText(w, http.StatusInternalServerError, err.Error())
	}
}
