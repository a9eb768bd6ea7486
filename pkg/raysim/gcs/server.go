package gcs

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// PathPrefix is the root of raysim's GCS protocol on the GCS port.
const PathPrefix = "/raysim/gcs/v1"

// ClusterInfo is what the GCS tells clients about the cluster it serves.
type ClusterInfo struct {
	SessionName   string `json:"session_name"`
	GCSAddress    string `json:"gcs_address"`
	DashboardURL  string `json:"dashboard_url"`
	HeadNodeID    string `json:"head_node_id"`
	RaysimVersion string `json:"raysim_version"`
	// HeartbeatPeriodMs is how often workers should send heartbeats.
	HeartbeatPeriodMs int64 `json:"heartbeat_period_ms"`
}

// Load is the cluster's load as an autoscaler reads it: every node, and the resources of each piece of
// work waiting for room to start (oldest first).
type Load struct {
	Nodes          []NodeInfo     `json:"nodes"`
	PendingDemands []resource.Set `json:"pending_demands"`
}

// RegisterResponse answers a worker's registration.
type RegisterResponse struct {
	NodeID string      `json:"node_id"`
	Info   ClusterInfo `json:"cluster"`
}

// Handler serves the GCS protocol for a table:
//
//	GET    /raysim/gcs/v1/health                  "success" while the GCS runs
//	GET    /raysim/gcs/v1/info                    ClusterInfo
//	GET    /raysim/gcs/v1/nodes                   []NodeInfo
//	POST   /raysim/gcs/v1/nodes                   NodeInfo -> RegisterResponse
//	POST   /raysim/gcs/v1/nodes/{id}/heartbeat    204, or 404 when the node is unknown or dead
//	DELETE /raysim/gcs/v1/nodes/{id}              204, or 404
//	GET    /raysim/gcs/v1/load                    Load (what an autoscaler reads)
//	PUT    /raysim/gcs/v1/autoscaler              AutoscalerStatus -> 204 (what an autoscaler reports)
//
// info is called for each request that needs the cluster description, demands for the resources work
// waiting to start asks for (nil: none).
func Handler(t *Table, info func() ClusterInfo, demands func() []resource.Set) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("success"))
	})
	mux.HandleFunc("GET "+PathPrefix+"/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, info())
	})
	mux.HandleFunc("GET "+PathPrefix+"/nodes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, t.Nodes())
	})
	mux.HandleFunc("POST "+PathPrefix+"/nodes", func(w http.ResponseWriter, r *http.Request) {
		var n NodeInfo
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&n); err != nil {
			http.Error(w, "bad node registration: "+err.Error(), http.StatusBadRequest)
			return
		}
		n.IsHead = false
		stored := t.Register(n)
		writeJSON(w, http.StatusOK, RegisterResponse{NodeID: stored.NodeID, Info: info()})
	})
	mux.HandleFunc("POST "+PathPrefix+"/nodes/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		nodeStatus(w, t.Heartbeat(r.PathValue("id")))
	})
	mux.HandleFunc("GET "+PathPrefix+"/load", func(w http.ResponseWriter, r *http.Request) {
		l := Load{Nodes: t.Nodes(), PendingDemands: []resource.Set{}}
		if demands != nil {
			l.PendingDemands = demands()
		}
		writeJSON(w, http.StatusOK, l)
	})
	mux.HandleFunc("PUT "+PathPrefix+"/autoscaler", func(w http.ResponseWriter, r *http.Request) {
		var s AutoscalerStatus
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&s); err != nil {
			http.Error(w, "bad autoscaler status: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.Time = t.now()
		t.SetAutoscalerStatus(s)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE "+PathPrefix+"/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		reason := r.URL.Query().Get("reason")
		if reason == "" {
			reason = "the node left the cluster"
		}
		nodeStatus(w, t.Leave(r.PathValue("id"), reason))
	})
	return mux
}

func nodeStatus(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrUnknownNode):
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
