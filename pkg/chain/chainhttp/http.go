// Package chainhttp serves a chain.Recorder over HTTP (mounted in the API server, authenticated and
// authorized like any non-resource URL) and reads it back: Client is the chain.Source of rayctl trace,
// diagnose, demo and bench. The wire format is described in docs/chain.md.
package chainhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/rayctl/rayctl/pkg/chain"
)

// PathPrefix is where the API server serves the recorder. Requests are authenticated and authorized
// like any other non-resource URL (system:masters, or a role with nonResourceURLs /debug/chain/*).
const PathPrefix = "/debug/chain/"

// TraceResult is the answer of GET /debug/chain/trace.
type TraceResult struct {
	Steps []chain.Step `json:"steps"`
}

// IsLongRunning reports whether a request to the recorder streams (the API server exempts it from
// its request timeout).
func IsLongRunning(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, PathPrefix) && r.URL.Query().Get("watch") == "true"
}

// Handler serves rec under PathPrefix:
//
//	GET events?after=SEQ&kind=K&namespace=NS&name=N&component=C&hop=H   kept events, oldest first (a chain.EventList)
//	GET events?watch=true&…                                            kept events, then new ones as they come (JSON lines)
//	GET trace?kind=K&namespace=NS&name=N                                the causal timeline of one object
//	GET controllers                                                     the controllers, their caches and queues
func Handler(rec *chain.Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		q := req.URL.Query()
		switch strings.TrimPrefix(req.URL.Path, PathPrefix) {
		case "events":
			f, err := filterFrom(q.Get)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if q.Get("watch") == "true" {
				stream(w, req, rec, f)
				return
			}
			writeJSON(w, rec.List(f))
		case "trace":
			if q.Get("kind") == "" || q.Get("name") == "" {
				http.Error(w, "trace needs kind and name", http.StatusBadRequest)
				return
			}
			writeJSON(w, TraceResult{Steps: chain.Trace(rec.Events(chain.Filter{}), q.Get("kind"), q.Get("namespace"), q.Get("name"))})
		case "controllers":
			writeJSON(w, rec.Controllers())
		default:
			http.NotFound(w, req)
		}
	})
}

func filterFrom(get func(string) string) (chain.Filter, error) {
	f := chain.Filter{Kind: get("kind"), Namespace: get("namespace"), Name: get("name"), Component: get("component"), Hop: chain.Hop(get("hop"))}
	if a := get("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return f, err
		}
		f.After = n
	}
	return f, nil
}

// stream writes the kept events that pass f, then each new one, one JSON object a line, until the
// client goes away.
func stream(w http.ResponseWriter, req *http.Request, rec *chain.Recorder, f chain.Filter) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	_ = rec.Follow(req.Context(), f, func(e chain.Event) error { return enc.Encode(e) }, func() {
		if flusher != nil {
			flusher.Flush()
		}
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
