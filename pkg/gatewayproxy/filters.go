package gatewayproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The filter types the proxy applies, as the Gateway API names them.
const (
	FilterRequestHeaderModifier  = "RequestHeaderModifier"
	FilterResponseHeaderModifier = "ResponseHeaderModifier"
	FilterRequestRedirect        = "RequestRedirect"
	FilterURLRewrite             = "URLRewrite"
	FilterRequestMirror          = "RequestMirror"
)

// The path modifiers of a redirect or a rewrite.
const (
	ReplaceFullPath    = "ReplaceFullPath"
	ReplacePrefixMatch = "ReplacePrefixMatch"
)

// Filter is one HTTPRoute filter, applied to the requests a rule (or one of its backends) routes. Type
// says which one of the other fields is set.
type Filter struct {
	// Type is one of the Filter* constants.
	Type string `json:"type"`
	// Headers is the change a RequestHeaderModifier or ResponseHeaderModifier makes.
	Headers *HeaderModifier `json:"headers,omitempty"`
	// Redirect is a RequestRedirect's answer.
	Redirect *Redirect `json:"redirect,omitempty"`
	// Rewrite is a URLRewrite's change to the request sent on.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// Mirror is where a RequestMirror sends copies of requests.
	Mirror *Mirror `json:"mirror,omitempty"`
}

// Header is a header's name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HeaderModifier changes headers: Set replaces a header's values, Add appends a value to the header's
// (joined with a comma, as the Gateway API's example shows: "foo" and add "bar" is "foo,bar"), Remove
// drops a header (names are case-insensitive).
type HeaderModifier struct {
	Set    []Header `json:"set,omitempty"`
	Add    []Header `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// apply changes h as m says: sets, then adds, then removes.
func (m *HeaderModifier) apply(h http.Header) {
	for _, s := range m.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range m.Add {
		h.Set(a.Name, strings.Join(append(h.Values(a.Name), a.Value), ","))
	}
	for _, r := range m.Remove {
		h.Del(r)
	}
}

// PathModifier replaces a request's path: all of it (ReplaceFullPath) or the prefix the rule matched
// (ReplacePrefixMatch, whole path elements).
type PathModifier struct {
	// Type is ReplaceFullPath or ReplacePrefixMatch.
	Type string `json:"type"`
	// Value is the new path, or what replaces the matched prefix.
	Value string `json:"value"`
}

// apply returns path changed as m says; prefix is the PathPrefix the rule matched.
func (m *PathModifier) apply(path, prefix string) string {
	if m == nil {
		return path
	}
	if m.Type == ReplaceFullPath {
		return m.Value
	}
	rest := strings.TrimPrefix(path, strings.TrimSuffix(prefix, "/"))
	out := strings.TrimSuffix(m.Value, "/") + rest
	if out == "" {
		return "/"
	}
	if !strings.HasPrefix(out, "/") {
		out = "/" + out
	}
	return out
}

// Redirect is a RequestRedirect: the request is answered with StatusCode and a Location made of the
// request's URL with the fields that are set replaced.
type Redirect struct {
	// Scheme is http or https; empty keeps the request's (http).
	Scheme string `json:"scheme,omitempty"`
	// Hostname replaces the request's host; empty keeps it.
	Hostname string `json:"hostname,omitempty"`
	// Path changes the request's path; nil keeps it.
	Path *PathModifier `json:"path,omitempty"`
	// Port is the Location's port; 0 means the scheme's well-known port when Scheme is set, else the
	// listener's port. Port 80 with http and 443 with https are left out of the Location.
	Port int32 `json:"port,omitempty"`
	// StatusCode is 301, 302, 303, 307 or 308; 0 means 302.
	StatusCode int `json:"statusCode,omitempty"`
}

// location is where r is redirected to, r having come in on listenerPort; prefix is the PathPrefix the
// rule matched.
func (d *Redirect) location(r *http.Request, listenerPort int32, prefix string) string {
	scheme, port := "http", listenerPort
	if d.Scheme != "" {
		scheme = d.Scheme
		switch scheme {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	if d.Port != 0 {
		port = d.Port
	}
	host := d.Hostname
	if host == "" {
		host = hostOnly(r.Host)
	}
	if !(scheme == "http" && port == 80 || scheme == "https" && port == 443) {
		host = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	u := url.URL{Scheme: scheme, Host: host, Path: d.Path.apply(r.URL.Path, prefix), RawQuery: r.URL.RawQuery}
	return u.String()
}

// Rewrite is a URLRewrite: the request sent to the backend carries Hostname as its Host, and its path
// changed as Path says.
type Rewrite struct {
	Hostname string        `json:"hostname,omitempty"`
	Path     *PathModifier `json:"path,omitempty"`
}

// Mirror is a RequestMirror: a copy of a Fraction of the requests goes to Addr, whose answer is
// dropped.
type Mirror struct {
	// Name says which backend it is (namespace/service:port), for logs.
	Name string `json:"name"`
	// Addr is host:port to send copies to.
	Addr string `json:"addr"`
	// Fraction is the share of requests mirrored, from 0 to 1.
	Fraction float64 `json:"fraction"`
}

// maxMirroredBody is the largest request body a mirror copies; a larger request is not mirrored.
const maxMirroredBody = 1 << 20

// Timeouts are a rule's timeouts (Go durations; empty or zero means none): Request bounds the whole
// exchange with the client, BackendRequest each request to a backend. Either answers 504 when it
// expires before the response has started (and cuts the response when it has).
type Timeouts struct {
	Request        string `json:"request,omitempty"`
	BackendRequest string `json:"backendRequest,omitempty"`
}

// parsedTimeouts are Timeouts read.
type parsedTimeouts struct{ request, backend time.Duration }

func (t *Timeouts) parse() (parsedTimeouts, error) {
	var out parsedTimeouts
	if t == nil {
		return out, nil
	}
	var err error
	if t.Request != "" {
		if out.request, err = time.ParseDuration(t.Request); err != nil {
			return out, fmt.Errorf("timeouts.request: %w", err)
		}
	}
	if t.BackendRequest != "" {
		if out.backend, err = time.ParseDuration(t.BackendRequest); err != nil {
			return out, fmt.Errorf("timeouts.backendRequest: %w", err)
		}
	}
	return out, nil
}

// withTimeout bounds ctx by d when d is above zero.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// check reports a filter whose Type lacks its field, or whose Type the proxy does not know.
func (f *Filter) check() error {
	var ok bool
	switch f.Type {
	case FilterRequestHeaderModifier, FilterResponseHeaderModifier:
		ok = f.Headers != nil
	case FilterRequestRedirect:
		ok = f.Redirect != nil
	case FilterURLRewrite:
		ok = f.Rewrite != nil
	case FilterRequestMirror:
		ok = f.Mirror != nil
	default:
		return fmt.Errorf("filter type %q is not supported", f.Type)
	}
	if !ok {
		return fmt.Errorf("filter %s has no settings", f.Type)
	}
	return nil
}

// exchange is what a rule's filters make of one request: the request to send on, the changes to the
// response, or a redirect that answers it.
type exchange struct {
	out      *http.Request
	response []*HeaderModifier
	redirect *Redirect
}

// applyFilters applies fs in order to x (whose out is the proxy's own copy of the request); prefix is
// the PathPrefix the rule matched. Mirrors are sent by send.
func applyFilters(x *exchange, fs []Filter, prefix string, send func(*Mirror, *http.Request)) {
	for _, f := range fs {
		switch f.Type {
		case FilterRequestHeaderModifier:
			f.Headers.apply(x.out.Header)
		case FilterResponseHeaderModifier:
			x.response = append(x.response, f.Headers)
		case FilterRequestRedirect:
			x.redirect = f.Redirect
		case FilterURLRewrite:
			if f.Rewrite.Hostname != "" {
				x.out.Host = f.Rewrite.Hostname
			}
			if f.Rewrite.Path != nil {
				x.out.URL.Path = f.Rewrite.Path.apply(x.out.URL.Path, prefix)
				x.out.URL.RawPath = ""
			}
		case FilterRequestMirror:
			if f.Mirror.Fraction >= 1 || rand.Float64() < f.Mirror.Fraction {
				send(f.Mirror, x.out)
			}
		}
	}
}

// mirrorCopy returns a copy of r to send to a mirror (its body read into memory, and r's body replaced
// by what was read), or nil when the body is larger than maxMirroredBody.
func mirrorCopy(r *http.Request) *http.Request {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxMirroredBody+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		if err != nil || len(b) > maxMirroredBody {
			return nil
		}
		body = b
	}
	c := r.Clone(context.WithoutCancel(r.Context()))
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	return c
}

type readCloser struct {
	io.Reader
	io.Closer
}

// hostOnly is host without its port.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}
