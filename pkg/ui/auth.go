package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strconv"
)

// The names the page's credentials go by.
const (
	// CookieName is the session cookie the token is exchanged for.
	CookieName = "rayctl_ui"
	// CSRFHeader must carry the page's CSRF token on every POST.
	CSRFHeader = "X-Rayctl-CSRF"
)

// guard holds the server's secrets and checks every request: the Host header, then the token or
// the session cookie, then for a POST the CSRF header.
type guard struct {
	port    int
	token   string // in the URL printed at start
	session string // the cookie's value
	csrf    string // handed to the page, echoed in CSRFHeader
}

func newGuard(port int) *guard {
	return &guard{port: port, token: randomHex(), session: randomHex(), csrf: randomHex()}
}

func randomHex() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// hostAllowed reports whether host (the Host header) names this server on loopback: a page served
// under another name (DNS rebinding) is refused.
func (g *guard) hostAllowed(host string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != strconv.Itoa(g.port) {
		return false
	}
	return h == "127.0.0.1" || h == "localhost"
}

// wrap puts next behind the checks. A request with the right token in its query gets the session
// cookie; a GET of the page with it is redirected to the same URL without the token, so the token
// stays out of the history and the address bar.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		if !g.hostAllowed(r.Host) {
			http.Error(w, "Host "+strconv.Quote(r.Host)+" is not this server's: use http://127.0.0.1:"+strconv.Itoa(g.port)+"/", http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		if t := q.Get("token"); t != "" {
			if !equal(t, g.token) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: g.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if r.Method == http.MethodGet && r.URL.Path == "/" {
				q.Del("token")
				u := url.URL{Path: "/", RawQuery: q.Encode()}
				http.Redirect(w, r, u.String(), http.StatusSeeOther)
				return
			}
		} else if c, err := r.Cookie(CookieName); err != nil || !equal(c.Value, g.session) {
			http.Error(w, "unauthorized: open the URL `rayctl ui` printed (with its token)", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !equal(r.Header.Get(CSRFHeader), g.csrf) {
				http.Error(w, "missing or wrong "+CSRFHeader+" header", http.StatusForbidden)
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
