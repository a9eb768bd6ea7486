// Package raydashboard is the Ray controllers' client for the REST APIs that a
// Ray head's dashboard serves on port 8265 (Ray's own or raysim's): the Jobs
// API (submit a job under a chosen submission_id, read its status, stop it)
// and the Serve API (deploy a Serve config, read the applications' status), and
// the Resolver that finds a RayCluster's dashboard.
//
// Every call is bounded: connecting gives up after ConnectTimeout and a whole
// request after RequestTimeout, so an unreachable head never stalls a
// reconcile worker.
package raydashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Timeouts applied by New.
const (
	// ConnectTimeout bounds dialing the dashboard.
	ConnectTimeout = 2 * time.Second
	// RequestTimeout bounds one whole request, body included.
	RequestTimeout = 5 * time.Second
)

// Ray job states as the Jobs API reports them.
const (
	StatusPending   = "PENDING"
	StatusRunning   = "RUNNING"
	StatusStopped   = "STOPPED"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// alreadySubmittedPhrase is what Ray puts in the answer to a submission whose
// submission_id is taken (HTTP 500 from Ray and raysim; the text is what is meant to be stable).
const alreadySubmittedPhrase = "Please use a different submission_id"

// JobInfo is the part of GET /api/jobs/{id} the controller reads.
type JobInfo struct {
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// Entrypoint is the shell command the job runs.
	Entrypoint string `json:"entrypoint"`
	// JobID is Ray's internal job id (set once the driver started).
	JobID *string `json:"job_id"`
	// SubmissionID is the id the job was submitted under.
	SubmissionID *string `json:"submission_id"`
	// Message explains the status, e.g. why the job failed.
	Message *string `json:"message"`
	// ErrorType classifies a failure, e.g. JOB_ENTRYPOINT_COMMAND_ERROR.
	ErrorType *string `json:"error_type"`
	// StartTime and EndTime are Unix milliseconds; nil or 0 when unknown.
	StartTime *int64 `json:"start_time"`
	EndTime   *int64 `json:"end_time"`
}

// Text returns the message, or "" when there is none.
func (j *JobInfo) Text() string {
	if j == nil || j.Message == nil {
		return ""
	}
	return *j.Message
}

// SubmitRequest is the body of POST /api/jobs/.
type SubmitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id,omitempty"`
	RuntimeEnv          map[string]any     `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   float32            `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   float32            `json:"entrypoint_num_gpus,omitempty"`
	EntrypointResources map[string]float32 `json:"entrypoint_resources,omitempty"`
}

type submitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

type stopResponse struct {
	Stopped bool `json:"stopped"`
}

// HTTPError is a non-2xx answer from the dashboard.
type HTTPError struct {
	// Method and Path name the request.
	Method, Path string
	// Code is the HTTP status code.
	Code int
	// Body is the start of the answer's body.
	Body string
}

// Error shows the request, the status code and the body.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, strings.TrimSpace(e.Body))
}

// IsNotFound reports whether err says the job does not exist.
func IsNotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Code == http.StatusNotFound
}

// IsAlreadySubmitted reports whether err is the dashboard refusing a
// submission_id it already knows, i.e. the job was submitted before.
func IsAlreadySubmitted(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && strings.Contains(he.Body, alreadySubmittedPhrase)
}

// authHeader is the header Ray's dashboard reads a token from (besides Authorization), as KubeRay's
// dashboard client sends it.
const authHeader = "X-Ray-Authorization"

// authTokenKey is the context key of WithAuthToken.
type authTokenKey struct{}

// WithAuthToken returns ctx carrying the token of a cluster whose Ray requires one (RAY_AUTH_MODE=token):
// every request a Client makes with it sends the token.
func WithAuthToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, authTokenKey{}, token)
}

// Client calls one dashboard's Jobs API.
type Client struct {
	base string
	http *http.Client
}

// New returns a client for the dashboard at baseURL (e.g.
// http://10.244.0.5:8265) with ConnectTimeout and RequestTimeout, connecting from this process's own
// network and reporting its calls nowhere (NewDialing says otherwise).
func New(baseURL string) *Client { return NewDialing(baseURL, nil, nil) }

// DialFunc connects to an address on the pod network.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Observe wraps a client's transport to see its requests: a controller passes its chain transport
// (chainhooks.Transport), which reports the calls made within a reconcile to the chain sink as dashboard
// calls (method, URL, status code, latency).
type Observe func(next http.RoundTripper) http.RoundTripper

// NewDialing is New with the connections made by dial (nil: from this process's own network), such as
// rayctl's dialer into the node network namespace, where pod IPs are reachable, and the transport wrapped
// by observe (nil: not wrapped).
func NewDialing(baseURL string, dial DialFunc, observe Observe) *Client {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	transport := &http.Transport{
		Proxy: nil, // the dashboard is always reached directly
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
		ResponseHeaderTimeout: RequestTimeout,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConnsPerHost:   2,
	}
	var rt http.RoundTripper = transport
	if observe != nil {
		rt = observe(transport)
	}
	return NewWithHTTPClient(baseURL, &http.Client{Transport: rt, Timeout: RequestTimeout})
}

// NewWithHTTPClient returns a client that sends its requests through hc.
func NewWithHTTPClient(baseURL string, hc *http.Client) *Client {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), http: hc}
}

// BaseURL is the dashboard's URL the client talks to.
func (c *Client) BaseURL() string { return c.base }

// GetJobInfo reads one job; IsNotFound(err) when the dashboard does not know it.
func (c *Client) GetJobInfo(ctx context.Context, submissionID string) (*JobInfo, error) {
	var info JobInfo
	if err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(submissionID), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// SubmitJob submits a job and returns its submission id. A submission_id the
// dashboard already knows is an error for which IsAlreadySubmitted is true.
func (c *Client) SubmitJob(ctx context.Context, req SubmitRequest) (string, error) {
	var resp submitResponse
	if err := c.do(ctx, http.MethodPost, "/api/jobs/", req, &resp); err != nil {
		return "", err
	}
	if resp.SubmissionID != "" {
		return resp.SubmissionID, nil
	}
	return resp.JobID, nil
}

// StopJob asks the dashboard to stop a job. Stopping a job that has already
// ended, or that the dashboard does not know, is not an error.
func (c *Client) StopJob(ctx context.Context, submissionID string) error {
	var resp stopResponse
	err := c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(submissionID)+"/stop", nil, &resp)
	if IsNotFound(err) {
		return nil
	}
	if err != nil || resp.Stopped {
		return err
	}
	info, err := c.GetJobInfo(ctx, submissionID)
	if err != nil {
		return err
	}
	switch info.Status {
	case StatusStopped, StatusSucceeded, StatusFailed:
		return nil
	}
	return fmt.Errorf("job %s was not stopped; it is %s", submissionID, info.Status)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token, ok := ctx.Value(authTokenKey{}).(string); ok && token != "" {
		req.Header.Set(authHeader, "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		if len(data) > 2048 {
			data = data[:2048]
		}
		return &HTTPError{Method: method, Path: path, Code: resp.StatusCode, Body: string(data)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}
