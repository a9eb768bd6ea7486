package e2e

// Bad input: every manifest under testdata/badinput is malformed in one way (wrong types, missing fields,
// invalid names, bad YAML/JSON, wrong apiVersion/kind, unknown or duplicate fields under Strict field
// validation, wrong namespace, oversize bodies, deep nesting, bad quantities, Ray type errors...). Each is
// POSTed as-is to the path its header names and must get the 4xx the real API server answers, with a message
// naming the field path where there is one; nothing may be half-written and the server may not panic.
//
// A manifest's header, one `# key: value` per line before the body:
//
//	# expect: 422 spec.containers[0].image   HTTP code, then text the message or causes must contain (optional)
//	# post: /api/v1/namespaces/{ns}/pods       where to POST it; {ns} is the test's namespace
//	# query: fieldValidation=Strict           query string (optional)
//	# content-type: text/plain                overrides the type the extension gives (.json, .yaml)
//	# kubectl: spec.containers[0].image       also `kubectl apply` it; stderr must contain this text
//
// In the body, {{pad N}} becomes N 'x's, {{nest N}} N nested JSON arrays and {{nestobj N}} N nested objects,
// so that huge manifests need not be stored.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// badManifest is one file of testdata/badinput.
type badManifest struct {
	file        string
	code        int
	want        string
	path        string
	query       string
	contentType string
	kubectl     string
	kubectlSet  bool
	body        []byte
}

func loadBadManifests(t *testing.T) []badManifest {
	t.Helper()
	files, err := filepath.Glob("testdata/badinput/*")
	must(t, "listing testdata/badinput", err)
	sort.Strings(files)
	var out []badManifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, "reading "+f, err)
		m := badManifest{file: filepath.Base(f)}
		switch filepath.Ext(f) {
		case ".json":
			m.contentType = "application/json"
		case ".yaml", ".yml":
			m.contentType = "application/yaml"
		default:
			t.Fatalf("%s: want a .json or .yaml file", f)
		}
		rest := b
		for {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			key, val, ok := strings.Cut(strings.TrimPrefix(string(line), "# "), ": ")
			if !bytes.HasPrefix(line, []byte("# ")) || !ok {
				break
			}
			val = strings.TrimSpace(val)
			switch key {
			case "expect":
				code, want, _ := strings.Cut(val, " ")
				if m.code, err = strconv.Atoi(code); err != nil {
					t.Fatalf("%s: bad expect header %q", f, val)
				}
				m.want = strings.TrimSpace(want)
			case "post":
				m.path = val
			case "query":
				m.query = val
			case "content-type":
				m.contentType = val
			case "kubectl":
				m.kubectl, m.kubectlSet = val, true
			default:
				t.Fatalf("%s: unknown header %q", f, key)
			}
			rest = after
		}
		if m.code == 0 || m.path == "" {
			t.Fatalf("%s: needs `# expect:` and `# post:` headers", f)
		}
		m.body = expandBadBody(rest)
		out = append(out, m)
	}
	return out
}

// panicStart matches the first line of a panic in rayctl.log: recovered by the API server's filters,
// by apimachinery's HandleCrash, by net/http, or one that ended the process.
var panicStart = regexp.MustCompile(`Observed a panic|http: panic serving|^panic: |recovered from panic|\bpanic\b.*goroutine`)

var badTemplate = regexp.MustCompile(`\{\{(pad|nest|nestobj) (\d+)\}\}`)

// expandBadBody replaces {{pad N}}, {{nest N}} and {{nestobj N}}.
func expandBadBody(b []byte) []byte {
	return badTemplate.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := badTemplate.FindSubmatch(m)
		n, _ := strconv.Atoi(string(sub[2]))
		switch string(sub[1]) {
		case "pad":
			return bytes.Repeat([]byte("x"), n)
		case "nest":
			return append(bytes.Repeat([]byte("["), n), bytes.Repeat([]byte("]"), n)...)
		default:
			return append(append(bytes.Repeat([]byte(`{"a":`), n), '1'), bytes.Repeat([]byte("}"), n)...)
		}
	})
}

// listState is a collection's items as name → resourceVersion, or nil when it cannot be listed (unknown
// resources and namespaces).
func listState(ctx context.Context, hc *http.Client, host, path string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("listing %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	var list metav1.PartialObjectMetadataList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("listing %s: %v", path, err)
	}
	items := map[string]string{}
	for _, it := range list.Items {
		items[it.Name] = it.ResourceVersion
	}
	return items, nil
}

// postRaw sends body as-is and returns the HTTP code and the Status the server answered with (empty
// when the body is not a Status).
func postRaw(ctx context.Context, hc *http.Client, host string, m badManifest, ns string) (int, metav1.Status, string, error) {
	u := host + strings.ReplaceAll(m.path, "{ns}", ns)
	if m.query != "" {
		u += "?" + m.query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(m.body))
	if err != nil {
		return 0, metav1.Status{}, "", err
	}
	req.Header.Set("Content-Type", m.contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, metav1.Status{}, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var st metav1.Status
	_ = json.Unmarshal(b, &st)
	return resp.StatusCode, st, string(b), nil
}

func TestBadInput(t *testing.T) {
	in, ctx, ns := setup(t)
	manifests := loadBadManifests(t)
	if len(manifests) < 100 {
		t.Errorf("only %d manifests in testdata/badinput, want at least 100", len(manifests))
	}
	logPath := filepath.Join(in.DataDir, "rayctl.log")
	logStart := int64(0)
	if fi, err := os.Stat(logPath); err == nil {
		logStart = fi.Size()
	}

	// Each rejected manifest must leave the namespace's lists as they were: let the controllers publish
	// what every namespace gets first, so that it does not appear between two readings.
	namespacePublished(t, ctx, in, ns)
	// The object cm-already-exists collides with.
	_, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "badinput-existing"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	must(t, "creating badinput-existing", err)

	cfg := quiet(in.Config)
	hc, err := rest.HTTPClientFor(cfg)
	must(t, "HTTP client", err)
	host := strings.TrimSuffix(cfg.Host, "/")

	rejected := 0
	for _, m := range manifests {
		what := fmt.Sprintf("%s (POST %s)", m.file, m.path)
		collection := strings.ReplaceAll(m.path, "{ns}", ns)
		namespaced := strings.Contains(m.path, "{ns}")
		var before map[string]string
		if namespaced {
			before, err = listState(ctx, hc, host, collection)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
		}
		code, st, raw, err := postRaw(ctx, hc, host, m, ns)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if code >= 400 && code < 500 {
			rejected++
		}
		text := statusText(st) // the message and causes of a Status, else the raw answer
		if text == "" {
			text = raw
		}
		short := text
		if len(short) > 600 {
			short = short[:600] + "…"
		}
		switch {
		case code != m.code:
			t.Errorf("%s: got HTTP %d, want %d: %s", what, code, m.code, short)
		case m.want != "" && !strings.Contains(text, m.want):
			t.Errorf("%s: HTTP %d but the message does not mention %q: %s", what, code, m.want, short)
		default:
			t.Logf("%s: HTTP %d: %s", m.file, code, firstLine(short))
		}
		if code < 300 {
			// Accepted by mistake: remove it again so that the next manifests see the same list.
			deleteCreated(ctx, hc, host, collection, raw)
			continue
		}
		if namespaced {
			after, err := listState(ctx, hc, host, collection)
			if err != nil {
				t.Errorf("%s: %v", what, err)
			} else if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Errorf("%s: rejected, but the list changed: before %v, after %v", what, before, after)
			}
		} else if code != http.StatusNotFound {
			// Cluster-scoped (namespaces): the named object must not exist.
			if name := manifestName(m.body); name != "" {
				if _, err := in.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
					t.Errorf("%s: rejected, but namespace %q exists", what, name)
				}
			}
		}
	}

	// The user-facing side: the same manifests through `kubectl apply`.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	kubectlRuns := 0
	for _, m := range manifests {
		if !m.kubectlSet {
			continue
		}
		kubectlRuns++
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			stdout, stderr, err := in.Kubectl(ctx, string(m.body), "apply", "-n", ns, "-f", "-")
			switch {
			case err == nil:
				t.Errorf("kubectl apply %s: succeeded, want an error:\n%s", m.file, stdout)
			case !strings.Contains(stderr, m.kubectl):
				t.Errorf("kubectl apply %s: error does not mention %q:\n%s", m.file, m.kubectl, stderr)
			default:
				t.Logf("kubectl apply %s: %s", m.file, firstLine(strings.TrimSpace(stderr)))
			}
		}()
	}
	wg.Wait()

	// Nothing may have panicked meanwhile: count the panics the log reports (one stack trace has many
	// lines that mention the word) and show each one's first lines.
	panics := 0
	if f, err := os.Open(logPath); err == nil {
		defer f.Close()
		if _, err := f.Seek(logStart, io.SeekStart); err == nil {
			b, _ := io.ReadAll(f)
			lines := strings.Split(string(b), "\n")
			if !panicStart.Match(b) && strings.Contains(strings.ToLower(string(b)), "panic") {
				panics++
				t.Errorf("rayctl.log mentions a panic in a form this test does not know; look at %s", logPath)
			}
			seen := map[string]bool{} // rayctl.log may hold a klog line more than once
			for i, line := range lines {
				if !panicStart.MatchString(line) || seen[line] {
					continue
				}
				seen[line] = true
				panics++
				if panics <= 5 {
					t.Errorf("rayctl.log reports a panic:\n%s", strings.Join(lines[i:min(i+12, len(lines))], "\n"))
				}
			}
		}
	} else {
		t.Errorf("reading rayctl.log: %v", err)
	}
	t.Logf("%d manifests, %d rejected with 4xx, %d panics (and %d through kubectl apply)", len(manifests), rejected, panics, kubectlRuns)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// manifestName is the metadata.name of a YAML or JSON manifest, when it can be read.
func manifestName(body []byte) string {
	if m := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindSubmatch(body); m != nil {
		return string(m[1])
	}
	if m := regexp.MustCompile(`"name":"([^"]+)"`).FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return ""
}

// deleteCreated deletes the object a create wrongly accepted (its JSON in created).
func deleteCreated(ctx context.Context, hc *http.Client, host, collection, created string) {
	var obj metav1.PartialObjectMetadata
	if json.Unmarshal([]byte(created), &obj) != nil || obj.Name == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, host+collection+"/"+obj.Name+"?gracePeriodSeconds=0", nil)
	if err != nil {
		return
	}
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
}
