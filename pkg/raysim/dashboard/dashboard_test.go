package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

func startHead(t *testing.T) *node.Head {
	t.Helper()
	h, err := node.StartHead(node.HeadConfig{BindHost: "127.0.0.1", NodeIP: "127.0.0.1", TempDir: t.TempDir(),
		Resources: resource.Set{"CPU": 1}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

type reply struct {
	code int
	body []byte
}

func call(t *testing.T, method, url string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, data}
}

func loadSchema(t *testing.T) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile("testdata/jobs_api_schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for k, v := range all {
		if strings.HasPrefix(k, "_") {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		out[k] = m
	}
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "?"
}

// checkShape asserts that obj has exactly the documented fields, each with a documented type.
func checkShape(t *testing.T, schema map[string]map[string]string, kind string, obj map[string]any) {
	t.Helper()
	fields := schema[kind]
	for name, types := range fields {
		v, ok := obj[name]
		if !ok {
			t.Errorf("%s: missing field %q in %v", kind, name, obj)
			continue
		}
		if got := jsonType(v); !strings.Contains("|"+types+"|", "|"+got+"|") {
			t.Errorf("%s.%s is %s (%v), documented as %s", kind, name, got, v, types)
		}
	}
	for name := range obj {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s: undocumented field %q", kind, name)
		}
	}
	if kind == "JobDetails" {
		if di, ok := obj["driver_info"].(map[string]any); ok {
			checkShape(t, schema, "DriverInfo", di)
		}
		switch obj["status"] {
		case "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED":
		default:
			t.Errorf("status %v is not one of Ray's", obj["status"])
		}
	}
}

func decodeObj(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not a JSON object (%d): %s", r.code, r.body)
	}
	return m
}

func waitJob(t *testing.T, base, id string, want jobs.Status) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := call(t, "GET", base+"/api/jobs/"+id, nil)
		if r.code == 200 {
			m := decodeObj(t, r)
			if m["status"] == string(want) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never reached %s; last answer %d %s", id, want, r.code, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJobsAPIMatchesDocumentedShapes(t *testing.T) {
	h := startHead(t)
	base := h.DashboardURL()
	schema := loadSchema(t)

	r := call(t, "GET", base+"/api/version", nil)
	if r.code != 200 {
		t.Fatalf("version: %d %s", r.code, r.body)
	}
	ver := decodeObj(t, r)
	checkShape(t, schema, "VersionResponse", ver)
	if ver["version"] != jobs.APIVersion {
		t.Errorf("API version %v", ver["version"])
	}

	r = call(t, "POST", base+"/api/jobs/", map[string]any{
		"entrypoint": "echo shapes; sleep 30", "submission_id": "shape-1",
		"runtime_env": map[string]any{"env_vars": map[string]string{"X": "y"}}, "metadata": map[string]string{"k": "v"},
		"entrypoint_num_cpus": 0.5,
	})
	if r.code != 200 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	sub := decodeObj(t, r)
	checkShape(t, schema, "JobSubmitResponse", sub)
	if sub["submission_id"] != "shape-1" {
		t.Fatalf("submit answer %v", sub)
	}

	running := waitJob(t, base, "shape-1", jobs.StatusRunning)
	checkShape(t, schema, "JobDetails", running)

	r = call(t, "GET", base+"/api/jobs/", nil)
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil || r.code != 200 || len(list) != 1 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	checkShape(t, schema, "JobDetails", list[0])

	deadline := time.Now().Add(10 * time.Second)
	for {
		r = call(t, "GET", base+"/api/jobs/shape-1/logs", nil)
		logs := decodeObj(t, r)
		checkShape(t, schema, "JobLogsResponse", logs)
		if logs["logs"] == "shapes\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs never showed the output: %v", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	r = call(t, "POST", base+"/api/jobs/shape-1/stop", nil)
	stop := decodeObj(t, r)
	checkShape(t, schema, "JobStopResponse", stop)
	if stop["stopped"] != true {
		t.Fatalf("stop answer %v", stop)
	}
	stopped := waitJob(t, base, "shape-1", jobs.StatusStopped)
	checkShape(t, schema, "JobDetails", stopped)
	if stopped["end_time"] == nil {
		t.Error("stopped job has no end_time")
	}
	r = call(t, "POST", base+"/api/jobs/shape-1/stop", nil)
	if again := decodeObj(t, r); again["stopped"] != false {
		t.Errorf("stopping a stopped job answered %v", again)
	}

	r = call(t, "DELETE", base+"/api/jobs/shape-1", nil)
	del := decodeObj(t, r)
	checkShape(t, schema, "JobDeleteResponse", del)
	if del["deleted"] != true {
		t.Fatalf("delete answer %v", del)
	}
	if r := call(t, "GET", base+"/api/jobs/shape-1", nil); r.code != 404 {
		t.Fatalf("get after delete: %d %s", r.code, r.body)
	}
}

// normalise replaces the values that change from run to run with placeholders.
func normalise(m map[string]any) {
	for _, k := range []string{"start_time", "end_time"} {
		if m[k] != nil {
			m[k] = "<ms>"
		}
	}
	if m["job_id"] != nil {
		m["job_id"] = "<driver-job-id>"
	}
	if di, ok := m["driver_info"].(map[string]any); ok {
		di["id"] = "<driver-job-id>"
		di["pid"] = "<pid>"
	}
	m["driver_agent_http_address"] = "<agent-url>"
	m["driver_node_id"] = "<node-id>"
}

func TestJobDetailsGolden(t *testing.T) {
	h := startHead(t)
	base := h.DashboardURL()
	cases := []struct {
		golden string
		submit map[string]any
		final  jobs.Status
	}{
		{"job_succeeded.golden.json", map[string]any{"entrypoint": "echo golden", "submission_id": "golden-1",
			"metadata": map[string]string{"owner": "golden-test"}, "runtime_env": map[string]any{"env_vars": map[string]string{"A": "1"}}}, jobs.StatusSucceeded},
		{"job_failed.golden.json", map[string]any{"entrypoint": "echo oops; exit 42", "submission_id": "golden-2"}, jobs.StatusFailed},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			if r := call(t, "POST", base+"/api/jobs/", tc.submit); r.code != 200 {
				t.Fatalf("submit: %d %s", r.code, r.body)
			}
			got := waitJob(t, base, tc.submit["submission_id"].(string), tc.final)
			if got["driver_agent_http_address"] != "http://"+h.AgentAddress() || got["driver_node_id"] != h.NodeID() {
				t.Errorf("driver address/node %v %v", got["driver_agent_http_address"], got["driver_node_id"])
			}
			normalise(got)
			raw, err := os.ReadFile(filepath.Join("testdata", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				t.Fatalf("job details differ from %s:\n%s", tc.golden, g)
			}
		})
	}
}

func TestJobsAPIErrors(t *testing.T) {
	h := startHead(t)
	base := h.DashboardURL()

	for _, c := range []struct{ method, path string }{
		{"GET", "/api/jobs/nope"}, {"GET", "/api/jobs/nope/logs"}, {"POST", "/api/jobs/nope/stop"}, {"DELETE", "/api/jobs/nope"},
	} {
		if r := call(t, c.method, base+c.path, nil); r.code != 404 || !strings.Contains(string(r.body), "nope") {
			t.Errorf("%s %s: %d %s, want 404", c.method, c.path, r.code, r.body)
		}
	}
	for _, bad := range []string{`{}`, `{"entrypoint": 3}`, `{"entrypoint": "true", "metadata": {"a": 1}}`, `{"entrypoint": "true", "entry_point": "typo"}`} {
		if r := call(t, "POST", base+"/api/jobs/", bad); r.code != 400 {
			t.Errorf("submit %s: %d %s, want 400", bad, r.code, r.body)
		}
	}
	// A body that is no JSON at all is a server error in Ray.
	if r := call(t, "POST", base+"/api/jobs/", `not json`); r.code != 500 {
		t.Errorf("submit not json: %d %s, want 500", r.code, r.body)
	}

	req := map[string]any{"entrypoint": "exec sleep 60", "submission_id": "twice"}
	if r := call(t, "POST", base+"/api/jobs/", req); r.code != 200 {
		t.Fatalf("first submit: %d %s", r.code, r.body)
	}
	r := call(t, "POST", base+"/api/jobs/", req)
	if r.code != 500 || !strings.Contains(string(r.body), "Please use a different submission_id") {
		t.Fatalf("reused submission_id: %d %s", r.code, r.body)
	}
	c := jobs.NewClient(base)
	if _, err := c.Submit(context.Background(), jobs.SubmitRequest{Entrypoint: "true", SubmissionID: "twice"}); !jobs.IsAlreadySubmitted(err) {
		t.Fatalf("client does not recognise the duplicate: %v", err)
	}
	// The deprecated job_id field names the submission too.
	if r := call(t, "POST", base+"/api/jobs/", map[string]any{"entrypoint": "true", "job_id": "twice"}); r.code != 500 {
		t.Fatalf("reused id through job_id: %d %s", r.code, r.body)
	}

	waitJob(t, base, "twice", jobs.StatusRunning)
	if r := call(t, "DELETE", base+"/api/jobs/twice", nil); r.code != 500 {
		t.Fatalf("deleting a running job: %d %s, want 500", r.code, r.body)
	}
	if r := call(t, "POST", base+"/api/jobs/", map[string]any{"entrypoint": "true", "submission_id": "a/b"}); r.code != 400 && r.code != 404 {
		t.Fatalf("id with a slash: %d %s", r.code, r.body)
	}
}

func TestTailLogsOverWebSocket(t *testing.T) {
	h := startHead(t)
	c := jobs.NewClient(h.DashboardURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Submit(ctx, jobs.SubmitRequest{Entrypoint: "for i in 1 2 3 4; do echo tail$i; sleep 0.1; done", SubmissionID: "tail"}); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	if err := c.Tail(ctx, "tail", func(s string) { got.WriteString(s) }); err != nil {
		t.Fatal(err)
	}
	if got.String() != "tail1\ntail2\ntail3\ntail4\n" {
		t.Fatalf("tailed %q", got.String())
	}
	if err := c.Tail(ctx, "missing", func(string) {}); !jobs.IsNotFound(err) {
		t.Fatalf("tail of a missing job: %v", err)
	}
}

func TestHealthStatusAndMetrics(t *testing.T) {
	h := startHead(t)
	for _, u := range []string{h.DashboardURL() + "/api/gcs_healthz", "http://" + h.AgentAddress() + "/api/local_raylet_healthz", "http://" + h.AgentAddress() + "/api/healthz"} {
		if r := call(t, "GET", u, nil); r.code != 200 || string(r.body) != "success" {
			t.Errorf("%s: %d %q", u, r.code, r.body)
		}
	}
	// As in a Ray cluster without an autoscaler: the autoscaler's fields are null, and ?format=1 has the
	// `ray status` report.
	r := call(t, "GET", h.DashboardURL()+"/api/cluster_status", nil)
	if want := `{"data":{"autoscalingError":null,"autoscalingStatus":null,"clusterStatus":null},"msg":"Got cluster status.","result":true}`; strings.TrimSpace(string(r.body)) != want {
		t.Errorf("cluster_status: %s, want %s", r.body, want)
	}
	r = call(t, "GET", h.DashboardURL()+"/api/cluster_status?format=1", nil)
	var st struct {
		Result bool `json:"result"`
		Data   struct {
			ClusterStatus string `json:"clusterStatus"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil || !st.Result || !strings.Contains(st.Data.ClusterStatus, "Idle:\n 1 node_") || !strings.Contains(st.Data.ClusterStatus, " 0.0/1.0 CPU\n") {
		t.Fatalf("cluster_status?format=1: %v %s", err, r.body)
	}
	r = call(t, "GET", "http://"+h.MetricsAddress()+"/metrics", nil)
	for _, want := range []string{`raysim_cluster_nodes{state="ALIVE"} 1`, `raysim_cluster_resources_total{resource="CPU"} 1`, `# TYPE raysim_jobs gauge`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
}
