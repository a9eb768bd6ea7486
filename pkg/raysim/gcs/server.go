package gcs

import (
	"encoding/json"
	"errors"
	"net/http"
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
//
// info is called for each request that needs the cluster description.
func Handler(t *Table, info func() ClusterInfo) http.Handler {
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
