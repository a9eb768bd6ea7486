package gcs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/internal/httpjson"
)

// Client talks raysim's GCS protocol to one GCS address ("host:port").
type Client struct {
	// Address is the GCS address, host:port.
	Address string
	// HTTP is the client used; nil means one with a 5 s timeout.
	HTTP *http.Client
	// Token, when set, is sent with every call (a GCS started with RAY_AUTH_MODE=token requires it).
	Token string
	// TokenSource, when set, is asked for the token before each call instead of sending Token (a token
	// file rewritten while the client runs).
	TokenSource func() string
}

// NewClient returns a client for the GCS at address (host:port).
func NewClient(address string) *Client {
	return &Client{Address: address, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

// StatusError is returned when the GCS answers with an unexpected HTTP status.
type StatusError struct {
	Code int
	Body string
}

// Error shows the status code and the body.
func (e *StatusError) Error() string {
	return fmt.Sprintf("GCS answered %d: %s", e.Code, strings.TrimSpace(e.Body))
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return httpjson.Caller{
		HTTP:        c.HTTP,
		Timeout:     5 * time.Second,
		MaxBody:     16 << 20,
		StatusError: func(code int, body string) error { return &StatusError{Code: code, Body: body} },
		Token:       c.token(),
	}.Do(ctx, method, "http://"+c.Address+PathPrefix+path, in, out)
}

// token is the token to send on the next call.
func (c *Client) token() string {
	if c.TokenSource != nil {
		return c.TokenSource()
	}
	return c.Token
}

// Health returns nil when the GCS answers its health check.
func (c *Client) Health(ctx context.Context) error {
	var s string
	if err := c.do(ctx, http.MethodGet, "/health", nil, &s); err != nil {
		return err
	}
	if strings.TrimSpace(s) != "success" {
		return fmt.Errorf("GCS health check answered %q", s)
	}
	return nil
}

// Info returns the cluster description.
func (c *Client) Info(ctx context.Context) (ClusterInfo, error) {
	var info ClusterInfo
	err := c.do(ctx, http.MethodGet, "/info", nil, &info)
	return info, err
}

// Nodes lists the cluster's nodes.
func (c *Client) Nodes(ctx context.Context) ([]NodeInfo, error) {
	var nodes []NodeInfo
	err := c.do(ctx, http.MethodGet, "/nodes", nil, &nodes)
	return nodes, err
}

// Load returns the nodes and the pending demands.
func (c *Client) Load(ctx context.Context) (Load, error) {
	var l Load
	err := c.do(ctx, http.MethodGet, "/load", nil, &l)
	return l, err
}

// ReportAutoscaler sends an autoscaler's status.
func (c *Client) ReportAutoscaler(ctx context.Context, s AutoscalerStatus) error {
	return c.do(ctx, http.MethodPut, "/autoscaler", s, nil)
}

// Register registers a worker node.
func (c *Client) Register(ctx context.Context, n NodeInfo) (RegisterResponse, error) {
	var r RegisterResponse
	err := c.do(ctx, http.MethodPost, "/nodes", n, &r)
	return r, err
}

// Heartbeat tells the GCS the node is alive. A *StatusError with Code 404
// means the GCS no longer knows the node (it restarted or declared it dead).
func (c *Client) Heartbeat(ctx context.Context, nodeID string) error {
	return c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(nodeID)+"/heartbeat", nil, nil)
}

// Leave deregisters the node.
func (c *Client) Leave(ctx context.Context, nodeID, reason string) error {
	return c.do(ctx, http.MethodDelete, "/nodes/"+url.PathEscape(nodeID)+"?reason="+url.QueryEscape(reason), nil, nil)
}
