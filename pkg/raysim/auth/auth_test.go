package auth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ray"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ray", "auth_token"), []byte(" from-home \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
		err  bool
	}{
		{"mode unset", map[string]string{TokenEnv: "x"}, "", false},
		{"mode disabled", map[string]string{ModeEnv: "disabled", TokenEnv: "x"}, "", false},
		{"env first", map[string]string{ModeEnv: "token", TokenEnv: "from-env", TokenPathEnv: file, "HOME": home}, "from-env", false},
		{"then the file", map[string]string{ModeEnv: "token", TokenPathEnv: file, "HOME": home}, "from-file", false},
		{"then the home", map[string]string{ModeEnv: "token", "HOME": home}, "from-home", false},
		{"a missing file", map[string]string{ModeEnv: "token", TokenPathEnv: filepath.Join(dir, "none"), "HOME": home}, "", true},
		{"none", map[string]string{ModeEnv: "token", "HOME": dir}, "", true},
	} {
		got, err := Token(env(tc.env))
		if got != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrNoToken)) {
			t.Errorf("%s: Token = %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestRequire(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "inner") })
	srv := httptest.NewServer(Require(Equal("s3cret"), DashboardOpen)(inner))
	defer srv.Close()
	open := httptest.NewServer(Require(Equal(""), DashboardOpen)(inner))
	defer open.Close()

	type hdr = map[string]string
	for _, tc := range []struct {
		name, base, method, path string
		headers                  hdr
		cookie                   string
		code                     int
		body                     string
	}{
		{"no token", srv.URL, "POST", "/api/jobs/", nil, "", 401, "Unauthorized: Missing authentication token"},
		{"wrong token", srv.URL, "GET", "/api/jobs/", hdr{"Authorization": "Bearer nope"}, "", 403, "Forbidden: Invalid authentication token"},
		{"no Bearer prefix", srv.URL, "GET", "/api/jobs/", hdr{"Authorization": "s3cret"}, "", 403, "Forbidden: Invalid authentication token"},
		{"a longer token", srv.URL, "GET", "/api/jobs/", hdr{"Authorization": "Bearer s3cret2"}, "", 403, "Forbidden"},
		{"Authorization", srv.URL, "POST", "/api/jobs/", hdr{"Authorization": "Bearer s3cret"}, "", 200, "inner"},
		{"X-Ray-Authorization", srv.URL, "GET", "/api/jobs/", hdr{"X-Ray-Authorization": "Bearer s3cret"}, "", 200, "inner"},
		{"cookie", srv.URL, "GET", "/api/jobs/", nil, "s3cret", 200, "inner"},
		{"wrong cookie", srv.URL, "GET", "/api/jobs/", nil, "nope", 403, "Forbidden"},
		{"Authorization comes first", srv.URL, "GET", "/api/jobs/", hdr{"Authorization": "Bearer nope", "X-Ray-Authorization": "Bearer s3cret"}, "s3cret", 403, "Forbidden"},
		{"the root is open", srv.URL, "GET", "/", nil, "", 200, "inner"},
		{"health is open", srv.URL, "GET", "/api/gcs_healthz", nil, "", 200, "inner"},
		{"serve health is open", srv.URL, "GET", "/-/healthz", nil, "", 200, "inner"},
		{"auth mode is open", srv.URL, "GET", "/api/authentication_mode", nil, "", 200, "inner"},
		{"static is open", srv.URL, "GET", "/static/js/main.js", nil, "", 200, "inner"},
		{"open paths do not look at a wrong token", srv.URL, "GET", "/api/healthz", hdr{"Authorization": "Bearer nope"}, "", 200, "inner"},
		{"no escape from static", srv.URL, "GET", "/static/../api/jobs/", nil, "", 401, "Unauthorized"},
		{"a health path's neighbour", srv.URL, "GET", "/api/gcs_healthz/x", nil, "", 401, "Unauthorized"},
		{"disabled: no token", open.URL, "POST", "/api/jobs/", nil, "", 200, "inner"},
		{"disabled: any token", open.URL, "GET", "/api/jobs/", hdr{"Authorization": "Bearer whatever"}, "", 200, "inner"},
	} {
		req, err := http.NewRequest(tc.method, tc.base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		if tc.cookie != "" {
			req.AddCookie(&http.Cookie{Name: CookieName, Value: tc.cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.HasPrefix(string(b), tc.body) {
			t.Errorf("%s: %s %s answered %d %q; want %d %q", tc.name, tc.method, tc.path, resp.StatusCode, b, tc.code, tc.body)
		}
	}
}

func TestRequireAgentPaths(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := Require(Equal("t"), AgentOpen)(inner)
	for path, want := range map[string]int{"/api/healthz": 200, "/api/local_raylet_healthz": 200, "/api/gcs_healthz": 401, "/": 401} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("agent %s without a token: %d, want %d", path, rec.Code, want)
		}
	}
}

func TestSetHeader(t *testing.T) {
	h := http.Header{}
	SetHeader(h, "")
	if len(h) != 0 {
		t.Fatalf("an empty token set %v", h)
	}
	SetHeader(h, "abc")
	if got := h.Get("Authorization"); got != "Bearer abc" {
		t.Fatalf("Authorization = %q", got)
	}
}
