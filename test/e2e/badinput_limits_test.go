package e2e

// Bad input beyond single manifests: bodies that amplify (YAML aliases, JSON patch copies), objects too
// large for etcd once stored, and requests whose bad parameters (resourceVersion, patch directives)
// storage or the patch code used to answer 500. Each gets a 4xx with a message, quickly, and nothing is
// written.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// rawClient is an admin HTTP client for hand-made requests.
type rawClient struct {
	hc   *http.Client
	host string
}

func newRawClient(t *testing.T, cfg *rest.Config) rawClient {
	t.Helper()
	hc, err := rest.HTTPClientFor(quiet(cfg))
	must(t, "HTTP client", err)
	return rawClient{hc: hc, host: strings.TrimSuffix(cfg.Host, "/")}
}

// do sends one request and returns its code, its Status's text (or the raw answer) and how long it took.
func (c rawClient) do(ctx context.Context, method, path, contentType string, body []byte) (int, string, time.Duration, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.host+path, r)
	if err != nil {
		return 0, "", 0, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	took := time.Since(start)
	var st metav1.Status
	text := string(b)
	if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
		text = statusText(st)
	}
	return resp.StatusCode, text, took, nil
}

// vmRSS is a process's resident set size in bytes, from /proc/PID/status.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, "reading the process status", err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			must(t, "parsing VmRSS", err)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// aliasBomb is a ConfigMap whose one 512 KiB value is anchored once and aliased 1,000 times: a 503 KiB
// body that is half a gigabyte once its aliases are expanded.
func aliasBomb(name string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  a: &a %s\n", name, strings.Repeat("x", 512<<10))
	for i := range 1000 {
		fmt.Fprintf(&b, "  k%d: *a\n", i)
	}
	return []byte(b.String())
}

// TestYAMLAliasAmplificationRefused sends, to an instance of its own, YAML bodies whose aliases expand
// them a thousandfold: one create, one server-side apply, then four creates at once. Each is refused with
// 413 (or 400) saying so, and the process's RSS stays within 50 MB of what it was before. A YAML body
// with a few aliases is still accepted. A JSON patch whose copy operations add more than a body may hold
// is refused too. The time each refusal took is logged.
func TestYAMLAliasAmplificationRefused(t *testing.T) {
	t.Parallel()
	in := framework.StartTest(t, append(framework.ControlPlaneOnly(), "--runtime", "fake")...)
	ctx := testContext(t)
	ns := newNamespace(t, ctx, in)
	c := newRawClient(t, in.Config)
	pid := in.Cmd.Process.Pid
	cms := "/api/v1/namespaces/" + ns + "/configmaps"

	// A body with a few aliases is fine.
	small := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: few-aliases\ndata:\n  a: &v value\n  b: *v\n  c: *v\n")
	code, text, _, err := c.do(ctx, http.MethodPost, cms, "application/yaml", small)
	must(t, "creating few-aliases", err)
	if code != http.StatusCreated {
		t.Fatalf("a ConfigMap with three aliases: HTTP %d, want 201: %s", code, text)
	}

	before := vmRSS(t, pid)
	refused := func(what string, code int, text string, took time.Duration, err error) {
		t.Helper()
		switch {
		case err != nil:
			t.Errorf("%s: %v", what, err)
		case code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest:
			t.Errorf("%s: HTTP %d after %v, want 413 or 400: %.300s", what, code, took, text)
		case !strings.Contains(text, "alias"):
			t.Errorf("%s: HTTP %d, but the message does not say the aliases are the matter: %.300s", what, code, text)
		default:
			t.Logf("%s: HTTP %d after %v: %.200s", what, code, took.Round(time.Millisecond), text)
		}
	}
	bomb := aliasBomb("bomb")
	t.Logf("the body: %d bytes", len(bomb))
	code, text, took, err := c.do(ctx, http.MethodPost, cms, "application/yaml", bomb)
	refused("create (application/yaml)", code, text, took, err)
	code, text, took, err = c.do(ctx, http.MethodPatch, cms+"/bomb?fieldManager=e2e", "application/apply-patch+yaml", bomb)
	refused("server-side apply (application/apply-patch+yaml)", code, text, took, err)
	code, text, took, err = c.do(ctx, http.MethodPut, cms+"/few-aliases", "application/yaml; charset=utf-8", aliasBomb("few-aliases"))
	refused("update (application/yaml; charset=utf-8)", code, text, took, err)

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, text, took, err := c.do(ctx, http.MethodPost, cms, "application/yaml", aliasBomb(fmt.Sprintf("bomb-%d", i)))
			refused(fmt.Sprintf("concurrent create %d", i), code, text, took, err)
		}()
	}
	wg.Wait()

	// A JSON patch whose copies add up to more than a body may hold.
	_, err = in.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "few-aliases", "application/merge-patch+json",
		[]byte(`{"data":{"a":"`+strings.Repeat("y", 512<<10)+`"}}`), metav1.PatchOptions{})
	must(t, "growing few-aliases to 512 KiB", err)
	var ops []string
	for i := range 20 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/data/a","path":"/data/c%d"}`, i))
	}
	code, text, took, err = c.do(ctx, http.MethodPatch, cms+"/few-aliases", "application/json-patch+json", []byte("["+strings.Join(ops, ",")+"]"))
	switch {
	case err != nil:
		t.Errorf("JSON patch copies: %v", err)
	case code < 400 || code >= 500:
		t.Errorf("JSON patch copying 512 KiB 20 times: HTTP %d after %v, want a 4xx: %.300s", code, took, text)
	default:
		t.Logf("JSON patch copying 512 KiB 20 times: HTTP %d after %v: %.200s", code, took.Round(time.Millisecond), text)
	}

	after := vmRSS(t, pid)
	t.Logf("rayctl RSS: %d MiB before, %d MiB after", before>>20, after>>20)
	if after > before+50<<20 {
		t.Errorf("rayctl's RSS grew from %d MiB to %d MiB, more than 50 MB", before>>20, after>>20)
	}
	list, err := in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing ConfigMaps", err)
	if stored := withoutRootCA(list.Items); len(stored) != 1 || len(stored[0].Data) != 3 {
		t.Errorf("after the refusals %d ConfigMaps are stored (want few-aliases alone, with its three keys)", len(stored))
	}
}

// bigKeys is a JSON map of n keys of 253 bytes (the longest ConfigMap key) with empty values: as large
// again in managedFields, which name every key.
func bigKeys(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		m[k+strings.Repeat("x", 253-len(k))] = ""
	}
	return m
}

// TestStoredObjectTooLargeAnswers413 writes objects whose bodies are under the 1.5 MiB request limit but
// whose stored form (managedFields name every key again) is over etcd's 2 MiB request limit, a ConfigMap
// and a RayCluster each. Server-side apply, creating or applying to an existing small object, is refused
// with 413 saying the stored object is too large, its size and the limit, and nothing is stored. A
// plain create is stored without its managedFields, whole otherwise, as kube-apiserver does (its create
// handler tries once more without them). How long each answer took is logged.
func TestStoredObjectTooLargeAnswers413(t *testing.T) {
	in, ctx, ns := setup(t)
	c := newRawClient(t, in.Config)
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "annotations": map[string]string{"a": strings.Repeat("z", 200<<10)}},
		"data":     bigKeys(4100),
	}
	cmBody, err := json.Marshal(cm)
	must(t, "encoding the ConfigMap", err)
	rc := framework.RayCluster("big").Object
	rc["spec"].(map[string]any)["headGroupSpec"].(map[string]any)["rayStartParams"] = bigKeys(5500)
	rcBody, err := json.Marshal(rc)
	must(t, "encoding the RayCluster", err)
	t.Logf("bodies: ConfigMap %d bytes, RayCluster %d bytes", len(cmBody), len(rcBody))
	cms := "/api/v1/namespaces/" + ns + "/configmaps"
	rcs := "/apis/ray.io/v1/namespaces/" + ns + "/rayclusters"

	// Objects that exist, small, for the updates (server-side apply to an existing object).
	_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "grows"}}, metav1.CreateOptions{})
	must(t, "creating the ConfigMap grows", err)
	small, err := json.Marshal(framework.RayCluster("grows").Object)
	must(t, "encoding the RayCluster grows", err)
	if code, text, _, err := c.do(ctx, http.MethodPost, rcs, "application/json", small); err != nil || code != http.StatusCreated {
		t.Fatalf("creating the RayCluster grows: HTTP %d %v: %s", code, err, text)
	}
	cm["metadata"].(map[string]any)["name"] = "grows"
	cmGrow, err := json.Marshal(cm)
	must(t, "encoding the ConfigMap update", err)
	rc["metadata"].(map[string]any)["name"] = "grows"
	rcGrow, err := json.Marshal(rc)
	must(t, "encoding the RayCluster update", err)

	for _, tc := range []struct {
		what, method, path, contentType string
		body                            []byte
	}{
		{"ConfigMap server-side apply", http.MethodPatch, cms + "/big?fieldManager=e2e", "application/apply-patch+yaml", cmBody},
		{"ConfigMap server-side apply to an existing one", http.MethodPatch, cms + "/grows?fieldManager=e2e", "application/apply-patch+yaml", cmGrow},
		{"RayCluster server-side apply", http.MethodPatch, rcs + "/big?fieldManager=e2e", "application/apply-patch+yaml", rcBody},
		{"RayCluster server-side apply to an existing one", http.MethodPatch, rcs + "/grows?fieldManager=e2e", "application/apply-patch+yaml", rcGrow},
	} {
		code, text, took, err := c.do(ctx, tc.method, tc.path, tc.contentType, tc.body)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case code != http.StatusRequestEntityTooLarge || !strings.Contains(text, "too large to store") ||
			!strings.Contains(text, "MiB") || !strings.Contains(text, "at most 2088960 bytes"):
			t.Errorf("%s: HTTP %d after %v, want 413 saying the stored object is too large, its size and the limit: %.400s", tc.what, code, took, text)
		default:
			t.Logf("%s: HTTP %d after %v: %.200s", tc.what, code, took.Round(time.Millisecond), text)
		}
	}
	// A plain create: stored without managedFields, every key kept.
	for _, tc := range []struct {
		what, collection string
		body             []byte
		keys             func(map[string]any) map[string]any
	}{
		{"ConfigMap create", cms, cmBody, func(o map[string]any) map[string]any { m, _ := o["data"].(map[string]any); return m }},
		{"RayCluster create", rcs, rcBody, func(o map[string]any) map[string]any {
			spec, _ := o["spec"].(map[string]any)
			head, _ := spec["headGroupSpec"].(map[string]any)
			m, _ := head["rayStartParams"].(map[string]any)
			return m
		}},
	} {
		code, text, took, err := c.do(ctx, http.MethodPost, tc.collection, "application/json", tc.body)
		if err != nil || code != http.StatusCreated {
			t.Errorf("%s: HTTP %d after %v (%v), want 201, stored without managedFields: %.400s", tc.what, code, took, err, text)
			continue
		}
		var stored map[string]any
		must(t, "reading the created object", json.Unmarshal([]byte(text), &stored))
		meta, _ := stored["metadata"].(map[string]any)
		if mf := meta["managedFields"]; mf != nil || len(tc.keys(stored)) < 4100 {
			t.Errorf("%s: stored with managedFields %v and %d keys; want none, and every key", tc.what, mf != nil, len(tc.keys(stored)))
		}
		t.Logf("%s: HTTP %d after %v, stored without managedFields", tc.what, code, took.Round(time.Millisecond))
	}
	got, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "grows", metav1.GetOptions{})
	must(t, "reading grows", err)
	if len(got.Data) != 0 {
		t.Errorf("grows has %d keys after its refused updates", len(got.Data))
	}
}

// TestClientErrorsAnswer4xx sends requests whose parameters are bad — a resourceVersion that is not a
// number (watch, list, get, an update's or a patch's metadata.resourceVersion), strategic-merge-patch
// directives that are unknown or do not fit the object, bad resourceVersionMatch, limit, continue and
// selectors — against a ConfigMap and a RayCluster. Each gets a 4xx with a message, never a 500, and the
// objects are unchanged.
func TestClientErrorsAnswer4xx(t *testing.T) {
	in, ctx, ns := setup(t)
	c := newRawClient(t, in.Config)
	cm, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"},
	}, metav1.CreateOptions{})
	must(t, "creating cm", err)
	rcBody, err := json.Marshal(framework.RayCluster("rc").Object)
	must(t, "encoding rc", err)
	code, text, _, err := c.do(ctx, http.MethodPost, "/apis/ray.io/v1/namespaces/"+ns+"/rayclusters", "application/json", rcBody)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("creating rc: HTTP %d %v: %s", code, err, text)
	}
	type request struct{ method, path, contentType, body string }
	var cases []request
	for _, kind := range []struct{ collection, name, apiVersion, kind string }{
		{"/api/v1/namespaces/" + ns + "/configmaps", "cm", "v1", "ConfigMap"},
		{"/apis/ray.io/v1/namespaces/" + ns + "/rayclusters", "rc", "ray.io/v1", "RayCluster"},
	} {
		col, obj := kind.collection, kind.collection+"/"+kind.name
		for _, q := range []string{
			"watch=1&resourceVersion=abc", "watch=1&resourceVersion=-1", "resourceVersion=abc", "resourceVersion=1e3",
			"resourceVersion=abc&resourceVersionMatch=NotOlderThan", "resourceVersion=1&resourceVersionMatch=bogus",
			"resourceVersionMatch=Exact", "limit=abc", "limit=1&continue=garbage", "limit=1&continue=eyJ2IjoiYm9ndXMiLCJydiI6MSwic3RhcnQiOiJhIn0",
			"fieldSelector=bogus", "fieldSelector=spec.nope%3D1", "labelSelector=a%20in%20((", "timeoutSeconds=abc&watch=1",
		} {
			cases = append(cases, request{http.MethodGet, col + "?" + q, "", ""})
		}
		cases = append(cases,
			request{http.MethodGet, obj + "?resourceVersion=abc", "", ""},
			request{http.MethodPut, obj, "application/json", fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q,"resourceVersion":"garbage"}}`,
				kind.apiVersion, kind.kind, kind.name)},
			request{http.MethodPatch, obj, "application/merge-patch+json", `{"metadata":{"resourceVersion":"garbage"}}`},
			request{http.MethodPatch, obj, "application/json-patch+json", `[{"op":"replace","path":"/metadata/resourceVersion","value":"garbage"}]`},
		)
	}
	cmPath := "/api/v1/namespaces/" + ns + "/configmaps/cm"
	for _, p := range []string{
		`{"$patch":"bogus"}`, `{"$patch":1}`, `{"data":{"$patch":"bogus"}}`, `{"$setElementOrder/data":[{"a":1}]}`,
		`{"$setElementOrder/data":"x"}`, `{"$setElementOrder/binaryData":[1]}`, `{"$setElementOrder/metadata":[1]}`,
		`{"metadata":{"$setElementOrder/finalizers":"x"}}`, `{"$retainKeys":"x"}`, `{"$retainKeys":["zz"],"data":{"a":"q"}}`,
		`{"data":{"$setElementOrder/a":[1]}}`, `{"metadata":{"resourceVersion":"garbage"}}`,
	} {
		cases = append(cases, request{http.MethodPatch, cmPath, "application/strategic-merge-patch+json", p})
	}
	for _, r := range cases {
		var body []byte
		if r.body != "" {
			body = []byte(r.body)
		}
		what := fmt.Sprintf("%s %s %s", r.method, strings.TrimPrefix(r.path, "/api/v1/namespaces/"+ns), r.body)
		code, text, _, err := c.do(ctx, r.method, r.path, r.contentType, body)
		switch {
		case err != nil:
			t.Errorf("%s: %v", what, err)
		case code < 400 || code >= 500 || strings.TrimSpace(text) == "":
			t.Errorf("%s: HTTP %d, want a 4xx with a message: %.300s", what, code, text)
		default:
			t.Logf("%s: HTTP %d: %.160s", what, code, firstLine(text))
		}
	}
	got, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	must(t, "reading cm", err)
	if got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("cm changed: resourceVersion %s, was %s; data %v", got.ResourceVersion, cm.ResourceVersion, got.Data)
	}
}
