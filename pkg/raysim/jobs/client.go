package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/internal/httpjson"
	"github.com/rayctl/rayctl/pkg/raysim/internal/wsock"
)

// Client calls the Ray Jobs REST API of a dashboard (raysim's or Ray's).
type Client struct {
	// BaseURL is the dashboard URL, e.g. http://127.0.0.1:8265.
	BaseURL string
	// HTTP is the client used; nil means one with a 10 s timeout.
	HTTP *http.Client
	// Token, when set, is sent with every call (a dashboard started with RAY_AUTH_MODE=token
	// requires it).
	Token string
}

// NewClient returns a client for the dashboard at baseURL.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// HTTPError is a non-2xx answer from the dashboard.
type HTTPError struct {
	Code int
	Body string
}

// Error shows the status code and the body; a refusal of Ray's token authentication (401 without a
// token, 403 with a wrong one) as Ray's job client words it.
func (e *HTTPError) Error() string {
	body := strings.TrimSpace(e.Body)
	switch e.Code {
	case http.StatusUnauthorized:
		return fmt.Sprintf("Authentication required: %s\n\nToken authentication is enabled but no authentication token was found (HTTP %d)", body, e.Code)
	case http.StatusForbidden:
		return fmt.Sprintf("Authentication failed: %s\n\nToken authentication is enabled but the authentication token is invalid or incorrect (HTTP %d)", body, e.Code)
	}
	return fmt.Sprintf("request failed with status code %d: %s", e.Code, body)
}

// IsHTTPError reports whether err is an answer of the dashboard's (any HTTPError), not a failure to
// reach it.
func IsHTTPError(err error) bool {
	var he *HTTPError
	return errors.As(err, &he)
}

// IsNotFound reports whether err is the dashboard saying the job does not exist.
func IsNotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Code == http.StatusNotFound
}

// IsAlreadySubmitted reports whether err is the dashboard refusing a reused submission_id.
func IsAlreadySubmitted(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && strings.Contains(he.Body, "Please use a different submission_id")
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return httpjson.Caller{
		HTTP:        c.HTTP,
		Timeout:     10 * time.Second,
		MaxBody:     256 << 20,
		StatusError: func(code int, body string) error { return &HTTPError{Code: code, Body: body} },
		Token:       c.Token,
	}.Do(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, in, out)
}

func jobPath(id string, suffix string) string {
	return "/api/jobs/" + url.PathEscape(id) + suffix
}

// Version calls GET /api/version.
func (c *Client) Version(ctx context.Context) (VersionResponse, error) {
	var v VersionResponse
	return v, c.do(ctx, http.MethodGet, "/api/version", nil, &v)
}

// StatusReport calls GET /api/cluster_status?format=1 and returns the `ray status` report in it.
func (c *Client) StatusReport(ctx context.Context) (string, error) {
	var r struct {
		Data struct {
			ClusterStatus string `json:"clusterStatus"`
		} `json:"data"`
	}
	return r.Data.ClusterStatus, c.do(ctx, http.MethodGet, "/api/cluster_status?format=1", nil, &r)
}

// Submit calls POST /api/jobs/.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (SubmitResponse, error) {
	var r SubmitResponse
	return r, c.do(ctx, http.MethodPost, "/api/jobs/", req, &r)
}

// Get calls GET /api/jobs/{id}.
func (c *Client) Get(ctx context.Context, id string) (Details, error) {
	var d Details
	return d, c.do(ctx, http.MethodGet, jobPath(id, ""), nil, &d)
}

// List calls GET /api/jobs/.
func (c *Client) List(ctx context.Context) ([]Details, error) {
	var d []Details
	return d, c.do(ctx, http.MethodGet, "/api/jobs/", nil, &d)
}

// Logs calls GET /api/jobs/{id}/logs.
func (c *Client) Logs(ctx context.Context, id string) (string, error) {
	var r LogsResponse
	return r.Logs, c.do(ctx, http.MethodGet, jobPath(id, "/logs"), nil, &r)
}

// Stop calls POST /api/jobs/{id}/stop.
func (c *Client) Stop(ctx context.Context, id string) (bool, error) {
	var r StopResponse
	return r.Stopped, c.do(ctx, http.MethodPost, jobPath(id, "/stop"), nil, &r)
}

// Delete calls DELETE /api/jobs/{id}.
func (c *Client) Delete(ctx context.Context, id string) (bool, error) {
	var r DeleteResponse
	return r.Deleted, c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, &r)
}

// Tail follows a job's logs through the WebSocket endpoint
// /api/jobs/{id}/logs/tail, calling emit for each message, until the server
// closes the stream (the job ended) or ctx ends. If the server has no such
// endpoint it falls back to polling /logs and the job status.
func (c *Client) Tail(ctx context.Context, id string, emit func(string)) error {
	if _, err := c.Get(ctx, id); err != nil {
		return err
	}
	u, err := url.Parse(strings.TrimRight(c.BaseURL, "/") + jobPath(id, "/logs/tail"))
	if err != nil {
		return err
	}
	hdr := http.Header{}
	auth.SetHeader(hdr, c.Token)
	conn, err := wsock.Dial(ctx, u, hdr)
	if err != nil {
		return c.pollTail(ctx, id, emit)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		msg, err := conn.ReadText()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		emit(msg)
	}
}

func (c *Client) pollTail(ctx context.Context, id string, emit func(string)) error {
	seen := 0
	for {
		d, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		logs, err := c.Logs(ctx, id)
		if err != nil {
			return err
		}
		if len(logs) > seen {
			emit(logs[seen:])
			seen = len(logs)
		}
		if d.Status.IsTerminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
