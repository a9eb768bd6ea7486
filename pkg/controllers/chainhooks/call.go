package chainhooks

import (
	"net/http"
	"time"
)

// Transport wraps next (nil means http.DefaultTransport) so that every request made with the context of
// a reconcile wrapped by Reconciler is reported to that controller's observer as a Call.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return observedTransport{next: next}
}

type observedTransport struct{ next http.RoundTripper }

func (t observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, ok := from(req.Context())
	if !ok {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	call := Call{Method: req.Method, URL: req.URL.String(), Took: time.Since(start)}
	if resp != nil {
		call.Code = resp.StatusCode
	}
	if err != nil {
		call.Err = err.Error()
	}
	r.h.obs.OnCall(r.h.controller, r.key, call)
	return resp, err
}
