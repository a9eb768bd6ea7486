// Package httpjson makes the small JSON-over-HTTP calls raysim's clients make: an optional JSON body out,
// a 2xx answer decoded back, any other answer turned into the caller's error.
package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
)

// Caller makes the calls of one client.
type Caller struct {
	// HTTP is the client used; nil means one with Timeout.
	HTTP *http.Client
	// Timeout is the timeout of the client used when HTTP is nil.
	Timeout time.Duration
	// MaxBody is how much of an answer is read at most.
	MaxBody int64
	// StatusError makes the error returned for an answer that is not 2xx, from its status code and body.
	StatusError func(code int, body string) error
	// Token, when set, is sent as "Authorization: Bearer <token>" (Ray's token authentication).
	Token string
}

// Do sends a method request to url, with in as its JSON body unless in is nil, and decodes a 2xx answer
// into out unless out is nil; a *string out takes the answer as it is.
func (c Caller) Do(ctx context.Context, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	auth.SetHeader(req.Header, c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: c.Timeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return c.StatusError(resp.StatusCode, string(data))
	}
	if out == nil {
		return nil
	}
	if s, ok := out.(*string); ok {
		*s = string(data)
		return nil
	}
	return json.Unmarshal(data, out)
}
