package chainhttp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain"
)

// Client reads a recorder through the API server; it is a chain.Source.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client that authenticates as cfg does.
func NewClient(cfg *rest.Config) (*Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{base: strings.TrimRight(cfg.Host, "/") + PathPrefix, http: hc}, nil
}

var _ chain.Source = (*Client)(nil)

// values is f as query parameters.
func values(f chain.Filter) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"kind": f.Kind, "namespace": f.Namespace, "name": f.Name, "component": f.Component, "hop": string(f.Hop)} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.After > 0 {
		v.Set("after", strconv.FormatUint(f.After, 10))
	}
	return v
}

func (c *Client) get(ctx context.Context, path string, q url.Values, into any) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

func (c *Client) do(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("the API server has no chain recorder (is it rayctl up with the recorder on?): %s", strings.TrimSpace(string(body)))
		}
		return nil, fmt.Errorf("%s%s: %s: %s", PathPrefix, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp, nil
}

// Events lists the kept events that pass f.
func (c *Client) Events(ctx context.Context, f chain.Filter) (*chain.EventList, error) {
	var l chain.EventList
	return &l, c.get(ctx, "events", values(f), &l)
}

// Trace returns the causal timeline of one object.
func (c *Client) Trace(ctx context.Context, kind, namespace, name string) ([]chain.Step, error) {
	var t TraceResult
	q := url.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}}
	return t.Steps, c.get(ctx, "trace", q, &t)
}

// Controllers returns the controllers the recorder knows, with their queues.
func (c *Client) Controllers(ctx context.Context) ([]chain.ControllerInfo, error) {
	var out []chain.ControllerInfo
	return out, c.get(ctx, "controllers", nil, &out)
}

// Watch calls fn with each kept event that passes f and then with each new one, until ctx ends or fn
// returns an error.
func (c *Client) Watch(ctx context.Context, f chain.Filter, fn func(chain.Event) error) error {
	q := values(f)
	q.Set("watch", "true")
	resp, err := c.do(ctx, "events", q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e chain.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}
