package gcs

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// respServer is a tiny Redis: it reads RESP commands and answers PING with PONG once authenticated
// (when it has a password), AUTH with OK or an error, SCAN (one key a page) and DEL over its keys. It
// records the commands it saw.
type respServer struct {
	l        net.Listener
	user     string
	password string
	mu       sync.Mutex
	seen     []string
	keys     map[string]bool
}

func newRESPServer(t *testing.T, user, password string) *respServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveRESP(t, l, user, password)
}

// serveRESP serves the tiny Redis on l until the test ends.
func serveRESP(t *testing.T, l net.Listener, user, password string) *respServer {
	s := &respServer{l: l, user: user, password: password}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *respServer) serve(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	authed := s.password == ""
	for {
		args, err := readCommand(rd)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, strings.Join(args, " "))
		s.mu.Unlock()
		switch {
		case args[0] == "AUTH" && len(args) == 2 && s.user == "" && args[1] == s.password,
			args[0] == "AUTH" && len(args) == 3 && args[1] == s.user && args[2] == s.password:
			authed = true
			fmt.Fprint(c, "+OK\r\n")
		case args[0] == "AUTH":
			fmt.Fprint(c, "-WRONGPASS invalid username-password pair\r\n")
		case args[0] == "PING" && authed:
			fmt.Fprint(c, "+PONG\r\n")
		case args[0] == "SCAN" && authed && len(args) == 4 && args[2] == "MATCH":
			fmt.Fprint(c, s.scan(args[1], args[3]))
		case args[0] == "DEL" && authed:
			s.mu.Lock()
			n := 0
			for _, k := range args[1:] {
				if s.keys[k] {
					delete(s.keys, k)
					n++
				}
			}
			s.mu.Unlock()
			fmt.Fprintf(c, ":%d\r\n", n)
		default:
			fmt.Fprint(c, "-NOAUTH Authentication required.\r\n")
		}
	}
}

// scan answers SCAN cursor MATCH pattern one matching key at a time (the cursor is the index of the
// next key in sorted order), to exercise a client's cursor loop.
func (s *respServer) scan(cursor, pattern string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []string
	for k := range s.keys {
		all = append(all, k)
	}
	sort.Strings(all)
	i, _ := strconv.Atoi(cursor)
	var page []string
	for ; i < len(all) && len(page) == 0; i++ {
		if ok, _ := path.Match(pattern, all[i]); ok {
			page = append(page, all[i])
		}
	}
	next := strconv.Itoa(i)
	if i >= len(all) {
		next = "0"
	}
	out := fmt.Sprintf("*2\r\n$%d\r\n%s\r\n*%d\r\n", len(next), next, len(page))
	for _, k := range page {
		out += fmt.Sprintf("$%d\r\n%s\r\n", len(k), k)
	}
	return out
}

func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	var args []string
	for range n {
		if _, err := rd.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		a, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args = append(args, strings.TrimRight(a, "\r\n"))
	}
	return args, nil
}

func (s *respServer) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func TestRedisPing(t *testing.T) {
	ctx := context.Background()
	open := newRESPServer(t, "", "")
	if err := (Redis{Address: open.l.Addr().String()}).Ping(ctx); err != nil {
		t.Fatalf("no password: %v", err)
	}
	if got := open.commands(); len(got) != 1 || got[0] != "PING" {
		t.Errorf("commands %q, want only PING", got)
	}

	locked := newRESPServer(t, "", "s3cret")
	addr := locked.l.Addr().String()
	if err := (Redis{Address: "redis://" + addr, Password: "s3cret"}).Ping(ctx); err != nil {
		t.Errorf("redis:// and a password: %v", err)
	}
	if err := (Redis{Address: addr, Password: "wrong"}).Ping(ctx); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("a wrong password: %v", err)
	}
	if err := (Redis{Address: addr}).Ping(ctx); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("no password for a locked Redis: %v", err)
	}
	if err := (Redis{Address: "redis://:s3cret@" + addr}).Ping(ctx); err != nil {
		t.Errorf("the password in the URL: %v", err)
	}

	user := newRESPServer(t, "ray", "pw")
	if err := (Redis{Address: user.l.Addr().String(), Username: "ray", Password: "pw"}).Ping(ctx); err != nil {
		t.Errorf("user and password: %v", err)
	}
	if got := user.commands(); len(got) != 2 || got[0] != "AUTH ray pw" || got[1] != "PING" {
		t.Errorf("commands %q, want AUTH ray pw, PING", got)
	}

	for _, bad := range []string{"rediss://" + addr, "no-port", "redis://[::1"} {
		if err := (Redis{Address: bad}).Ping(ctx); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRedisFromEnv(t *testing.T) {
	env := map[string]string{"RAY_REDIS_ADDRESS": "redis:6379", "REDIS_PASSWORD": "pw", "RAY_external_storage_namespace": "ns"}
	r, ok := RedisFromEnv(func(k string) string { return env[k] })
	if !ok || r != (Redis{Address: "redis:6379", Password: "pw", Namespace: "ns"}) {
		t.Errorf("RedisFromEnv = %+v, %v", r, ok)
	}
	if _, ok := RedisFromEnv(func(string) string { return "" }); ok {
		t.Error("RedisFromEnv without RAY_REDIS_ADDRESS says ok")
	}
}

// TestRedisWait: a head waits for a Redis that is not there yet, logging rather than giving up, and
// goes on once it answers.
func TestRedisWait(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there for now

	var mu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	done := make(chan error, 1)
	go func() {
		done <- (Redis{Address: addr}).Wait(context.Background(), 20*time.Millisecond, time.Hour, logf)
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned without a Redis: %v", err)
	default:
	}
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	serveRESP(t, l2, "", "")
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "cannot reach Redis at "+addr) {
		t.Errorf("logs %q: want one failure line (logEvery is an hour)", logs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Redis{Address: addr}).Wait(ctx, time.Millisecond, time.Hour, func(string, ...any) {}); err == nil {
		t.Error("Wait with a cancelled context returned nil")
	}
}

// TestRedisDeleteNamespace: the cleanup deletes every key of its storage namespace (over several SCAN
// pages, with glob characters in the namespace taken literally) and nothing else; it retries a Redis
// that is not there the number of times asked, then fails saying so.
func TestRedisDeleteNamespace(t *testing.T) {
	ctx := context.Background()
	s := newRESPServer(t, "", "pw")
	s.keys = map[string]bool{"RAYa-1@NODE": true, "RAYa-1@KV": true, "RAYa-1@JOB": true, "RAYa-12@KV": true, "RAYaX1@KV": true, "other": true}
	r := Redis{Address: s.l.Addr().String(), Password: "pw", Namespace: "a-1"}
	n, err := r.DeleteNamespace(ctx, 1, time.Millisecond, t.Logf)
	if err != nil || n != 3 {
		t.Fatalf("DeleteNamespace = %d, %v; want 3 keys", n, err)
	}
	if len(s.keys) != 3 || !s.keys["RAYa-12@KV"] || !s.keys["RAYaX1@KV"] || !s.keys["other"] {
		t.Errorf("keys left %v: want only the other namespaces' and other", s.keys)
	}
	if n, err := r.DeleteNamespace(ctx, 1, time.Millisecond, t.Logf); err != nil || n != 0 {
		t.Errorf("a second cleanup = %d, %v; want 0 and no error", n, err)
	}
	if _, err := (Redis{Address: r.Address, Namespace: "a-1"}).DeleteNamespace(ctx, 1, time.Millisecond, t.Logf); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("without the password: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	var tries int
	_, err = (Redis{Address: gone, Namespace: "a-1"}).DeleteNamespace(ctx, 3, time.Millisecond, func(string, ...any) { tries++ })
	if err == nil || !strings.Contains(err.Error(), "in 3 attempts") || tries != 2 {
		t.Errorf("an absent Redis: %v after %d logged retries; want a failure after 3 attempts", err, tries)
	}
}
