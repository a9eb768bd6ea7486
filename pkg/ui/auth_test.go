package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// guarded is a guard on port 4242 in front of a handler that answers 200 "ok".
func guarded() (*guard, http.Handler) {
	g := newGuard(4242)
	return g, g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
}

func request(h http.Handler, method, target, host string, setup func(r *http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	if setup != nil {
		setup(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func withCookie(value string) func(r *http.Request) {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: value}) }
}

func TestTokenExchangedForCookie(t *testing.T) {
	g, h := guarded()
	w := request(h, "GET", "/?token="+g.token+"&workshop=1", "127.0.0.1:4242", nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("GET /?token=…: %d, want 303", w.Code)
	}
	if loc := w.Header().Get("Location"); loc != "/?workshop=1" {
		t.Errorf("redirect to %q, want /?workshop=1 (the token dropped, the rest kept)", loc)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	c := cookies[0]
	if c.Name != CookieName || c.Value != g.session || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("cookie %+v, want %s=<session>, HttpOnly, SameSite=Strict, Path=/", c, CookieName)
	}
	if c.Value == g.token {
		t.Error("the cookie carries the token itself")
	}
	if w := request(h, "GET", "/api/objects", "127.0.0.1:4242", withCookie(c.Value)); w.Code != http.StatusOK {
		t.Errorf("GET with the cookie: %d, want 200", w.Code)
	}
	// The token also authenticates a request by itself (an API call without the cookie).
	if w := request(h, "GET", "/api/objects?token="+g.token, "localhost:4242", nil); w.Code != http.StatusOK {
		t.Errorf("GET /api/objects?token=…: %d, want 200", w.Code)
	}
}

func TestUnauthenticatedRefused(t *testing.T) {
	g, h := guarded()
	for _, tc := range []struct {
		name   string
		target string
		setup  func(r *http.Request)
	}{
		{"no token, no cookie", "/", nil},
		{"no token, no cookie, static", "/static/app.js", nil},
		{"wrong token", "/?token=" + strings.Repeat("0", len(g.token)), nil},
		{"the token as a cookie", "/", withCookie(g.token)},
		{"wrong cookie", "/api/objects", withCookie("x")},
	} {
		w := request(h, "GET", tc.target, "127.0.0.1:4242", tc.setup)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.name, w.Code)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Errorf("%s: set a cookie", tc.name)
		}
	}
}

func TestHostChecked(t *testing.T) {
	g, h := guarded()
	for _, host := range []string{"evil.example:4242", "127.0.0.1:4243", "127.0.0.1", "localhost", "[::1]:4242", "127.0.0.2:4242", ""} {
		w := request(h, "GET", "/?token="+g.token, host, nil)
		if w.Code != http.StatusForbidden {
			t.Errorf("Host %q: %d, want 403", host, w.Code)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Errorf("Host %q: set a cookie", host)
		}
	}
	for _, host := range []string{"127.0.0.1:4242", "localhost:4242"} {
		if w := request(h, "GET", "/", host, withCookie(g.session)); w.Code != http.StatusOK {
			t.Errorf("Host %q: %d, want 200", host, w.Code)
		}
	}
}

func TestPostNeedsCSRFHeader(t *testing.T) {
	g, h := guarded()
	cookie := withCookie(g.session)
	for _, tc := range []struct {
		name  string
		setup func(r *http.Request)
		want  int
	}{
		{"cookie only", cookie, http.StatusForbidden},
		{"wrong header", func(r *http.Request) { cookie(r); r.Header.Set(CSRFHeader, "nope") }, http.StatusForbidden},
		{"header, other origin", func(r *http.Request) {
			cookie(r)
			r.Header.Set(CSRFHeader, g.csrf)
			r.Header.Set("Origin", "http://evil.example")
		}, http.StatusForbidden},
		{"header, no cookie", func(r *http.Request) { r.Header.Set(CSRFHeader, g.csrf) }, http.StatusUnauthorized},
		{"cookie and header", func(r *http.Request) { cookie(r); r.Header.Set(CSRFHeader, g.csrf) }, http.StatusOK},
		{"cookie, header, same origin", func(r *http.Request) {
			cookie(r)
			r.Header.Set(CSRFHeader, g.csrf)
			r.Header.Set("Origin", "http://127.0.0.1:4242")
		}, http.StatusOK},
	} {
		if w := request(h, "POST", "/api/demo", "127.0.0.1:4242", tc.setup); w.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.want)
		}
	}
}

func TestSecretsDiffer(t *testing.T) {
	a, b := newGuard(1), newGuard(1)
	if a.token == b.token || a.token == a.session || a.token == a.csrf || len(a.token) != 64 {
		t.Errorf("secrets not random and distinct: %q %q %q %q", a.token, b.token, a.session, a.csrf)
	}
}
