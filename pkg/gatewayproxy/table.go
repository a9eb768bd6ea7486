// Package gatewayproxy is the data plane of rayctl's Gateway: an HTTP reverse proxy that routes each
// request by a Table (which port it came in on, its host, path, method and headers) to one of the rule's
// backends, chosen by weight, applying the rule's filters (header changes, redirects, rewrites, mirrors)
// and timeouts. The Gateway controller (pkg/controllers/ray/gateway) computes the Table from a
// Gateway and its HTTPRoutes and stores it as JSON in a ConfigMap; `rayctl gateway-proxy`, run in a pod
// the controller makes, follows that ConfigMap and serves it. The package knows nothing of the Gateway
// API's types: the controller has resolved listeners, route attachment, precedence and Services.
package gatewayproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// ConfigMapKey is the key of the ConfigMap's data that holds the Table as JSON.
const ConfigMapKey = "table.json"

// Table is what one Gateway serves: a set of ports, each with its rules in order of precedence.
type Table struct {
	// Ports are the listeners' ports, each once.
	Ports []Port `json:"ports"`
}

// Port is one listening port and the rules of the routes attached to its listeners.
type Port struct {
	// Port is the TCP port the proxy listens on.
	Port int32 `json:"port"`
	// Rules are tried in order; the first that matches a request routes it. No match is a 404.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one match of one HTTPRoute rule, with its hostnames and the rule's backends.
type Rule struct {
	// Route names the HTTPRoute (namespace/name) the rule comes from, for logs.
	Route string `json:"route,omitempty"`
	// Hostnames the request's host must match (exact, or "*.suffix" for any subdomain); empty is any.
	Hostnames []string `json:"hostnames,omitempty"`
	// Match is what the request must carry.
	Match Match `json:"match"`
	// Backends share the requests the rule routes by weight. None, or weights that sum to 0, is a 500
	// (unless a RequestRedirect answers).
	Backends []Backend `json:"backends,omitempty"`
	// Filters apply, in order, to the requests the rule routes and their responses.
	Filters []Filter `json:"filters,omitempty"`
	// Timeouts bound the requests the rule routes.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
	// Error, when set, answers every request the rule routes with a 500 saying it: the rule has a filter
	// that does not resolve, which the Gateway API forbids skipping.
	Error string `json:"error,omitempty"`
}

// Match is an HTTPRoute match: a path, optionally a method, and headers that must all match.
type Match struct {
	// PathType is Exact, PathPrefix or RegularExpression.
	PathType string `json:"pathType"`
	// Path is the path (or the expression) to match.
	Path string `json:"path"`
	// Method, when set, is the request's method.
	Method string `json:"method,omitempty"`
	// Headers must all match.
	Headers []HeaderMatch `json:"headers,omitempty"`
	// QueryParams must all match (the first value of each name).
	QueryParams []HeaderMatch `json:"queryParams,omitempty"`
}

// HeaderMatch is one header (or query parameter) the request must carry: Exact (case-sensitive value)
// or RegularExpression.
type HeaderMatch struct {
	// Type is Exact or RegularExpression.
	Type string `json:"type"`
	// Name is the header's name (case-insensitive).
	Name string `json:"name"`
	// Value is the value (or the expression).
	Value string `json:"value"`
}

// Backend is one backend of a rule.
type Backend struct {
	// Name says which backend it is (namespace/service:port), for logs and the response header.
	Name string `json:"name"`
	// Addr is host:port to send requests to; empty when the reference did not resolve: its share of the
	// requests is answered 500, as the Gateway API asks.
	Addr string `json:"addr,omitempty"`
	// Weight is its share among the rule's backends.
	Weight int32 `json:"weight"`
	// Filters apply, after the rule's, to the requests sent to this backend.
	Filters []Filter `json:"filters,omitempty"`
}

// Path types and header match types of the Gateway API.
const (
	PathExact              = "Exact"
	PathPrefix             = "PathPrefix"
	MatchRegularExpression = "RegularExpression"
	HeaderExact            = "Exact"
)

// Parse reads a Table from JSON and checks its expressions compile.
func Parse(data []byte) (*Table, error) {
	var t Table
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("gateway table: %w", err)
	}
	for _, p := range t.Ports {
		for _, r := range p.Rules {
			if _, err := compileRule(r); err != nil {
				return nil, fmt.Errorf("gateway table: %w", err)
			}
		}
	}
	return &t, nil
}

// compileRule readies r to serve: its match compiled, its filters checked, its timeouts read.
func compileRule(r Rule) (*rule, error) {
	m, err := compile(r.Match)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", r.Route, err)
	}
	for _, fs := range append([][]Filter{r.Filters}, backendFilters(r.Backends)...) {
		for i := range fs {
			if err := fs[i].check(); err != nil {
				return nil, fmt.Errorf("route %s: %w", r.Route, err)
			}
		}
	}
	t, err := r.Timeouts.parse()
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", r.Route, err)
	}
	return &rule{Rule: r, m: m, timeouts: t, current: make([]int64, len(r.Backends))}, nil
}

func backendFilters(bs []Backend) [][]Filter {
	out := make([][]Filter, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Filters)
	}
	return out
}

// matcher is a compiled Match.
type matcher struct {
	m       Match
	path    *regexp.Regexp
	headers []*regexp.Regexp // per header, nil for Exact
	query   []*regexp.Regexp // per query parameter, nil for Exact
}

func compile(m Match) (*matcher, error) {
	c := &matcher{m: m, headers: make([]*regexp.Regexp, len(m.Headers)), query: make([]*regexp.Regexp, len(m.QueryParams))}
	var err error
	if m.PathType == MatchRegularExpression {
		if c.path, err = regexp.Compile("^(?:" + m.Path + ")$"); err != nil {
			return nil, err
		}
	}
	for i, h := range m.Headers {
		if h.Type == MatchRegularExpression {
			if c.headers[i], err = regexp.Compile(h.Value); err != nil {
				return nil, err
			}
		}
	}
	for i, q := range m.QueryParams {
		if q.Type == MatchRegularExpression {
			if c.query[i], err = regexp.Compile(q.Value); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// matches reports whether r matches.
func (c *matcher) matches(r *http.Request) bool {
	if !c.pathMatches(r.URL.Path) {
		return false
	}
	if c.m.Method != "" && r.Method != c.m.Method {
		return false
	}
	for i, h := range c.m.Headers {
		v := r.Header.Values(h.Name)
		if len(v) == 0 || !valueMatches(c.headers[i], h.Value, strings.Join(v, ",")) {
			return false
		}
	}
	if len(c.m.QueryParams) > 0 {
		q := r.URL.Query()
		for i, p := range c.m.QueryParams {
			v, ok := q[p.Name]
			if !ok || !valueMatches(c.query[i], p.Value, v[0]) {
				return false
			}
		}
	}
	return true
}

// valueMatches matches got against re, or against want exactly where re is nil.
func valueMatches(re *regexp.Regexp, want, got string) bool {
	if re != nil {
		return re.MatchString(got)
	}
	return got == want
}

func (c *matcher) pathMatches(p string) bool {
	if p == "" {
		p = "/"
	}
	switch c.m.PathType {
	case PathExact:
		return p == c.m.Path
	case MatchRegularExpression:
		return c.path.MatchString(p)
	default: // PathPrefix: whole path elements, a trailing slash ignored
		prefix := strings.TrimSuffix(c.m.Path, "/")
		if prefix == "" {
			return true
		}
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	}
}

// hostMatches reports whether host (the request's, port stripped) matches one of hostnames.
func hostMatches(hostnames []string, host string) bool {
	if len(hostnames) == 0 {
		return true
	}
	host = strings.ToLower(host)
	for _, h := range hostnames {
		h = strings.ToLower(h)
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}
