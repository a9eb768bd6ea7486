package rayjob

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// fakeAPI is a dashboard that knows the jobs in jobs and counts submissions.
type fakeAPI struct {
	mu        sync.Mutex
	jobs      map[string]*raydashboard.JobInfo
	submitted []raydashboard.SubmitRequest
	submitErr error
	getErr    error
	stopped   []string
}

func (f *fakeAPI) SubmitJob(_ context.Context, req raydashboard.SubmitRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submitted = append(f.submitted, req)
	if f.submitErr != nil {
		return "", f.submitErr
	}
	f.jobs[req.SubmissionID] = &raydashboard.JobInfo{Status: raydashboard.StatusPending, Entrypoint: req.Entrypoint}
	return req.SubmissionID, nil
}

func (f *fakeAPI) GetJobInfo(_ context.Context, id string) (*raydashboard.JobInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	if j, ok := f.jobs[id]; ok {
		c := *j
		return &c, nil
	}
	return nil, &raydashboard.HTTPError{Method: "GET", Path: "/api/jobs/" + id, Code: 404, Body: "Job " + id + " does not exist"}
}

func (f *fakeAPI) StopJob(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, id)
	return nil
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	return s
}

const ns = "default"

func clusterSpec() *rayv1.RayClusterSpec {
	return &rayv1.RayClusterSpec{
		RayVersion: "2.46.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "ray-head", Image: "rayctl.local/raysim:latest",
			Ports: []corev1.ContainerPort{{Name: "gcs-server", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265}},
		}}}}},
	}
}

func newJob(mut ...func(*rayv1.RayJob)) *rayv1.RayJob {
	j := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, UID: "uid-demo", Generation: 1},
		Spec: rayv1.RayJobSpec{
			Entrypoint:     "echo hi",
			SubmissionMode: rayv1.HTTPMode,
			RayClusterSpec: clusterSpec(),
		},
	}
	for _, m := range mut {
		m(j)
	}
	return j
}

// at puts the job in a state, as an earlier pass would have left it.
func at(st rayv1.JobDeploymentStatus) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) {
		j.Finalizers = []string{rayparams.FinalizerRayJob}
		j.Status.JobDeploymentStatus = st
		j.Status.JobId = "demo-abcde"
		j.Status.RayClusterName = "demo-xyz12"
		j.Status.StartTime = &metav1.Time{Time: time.Now().Add(-10 * time.Second).Truncate(time.Second)}
		if st != rayv1.JobDeploymentStatusInitializing {
			j.Status.DashboardURL = "demo-xyz12-head-svc.default.svc.cluster.local:8265"
		}
	}
}

func mode(m rayv1.JobSubmissionMode) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) { j.Spec.SubmissionMode = m }
}

func newCluster(name string, state rayv1.ClusterState) *rayv1.RayCluster {
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       *clusterSpec(),
		Status:     rayv1.RayClusterStatus{State: state, Head: rayv1.HeadInfo{PodIP: "10.244.0.7"}},
	}
}

func submitter(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}, Status: batchv1.JobStatus{Conditions: conds}}
}

func jobCond(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: reason + " message",
		LastTransitionTime: metav1.Time{Time: time.Now().Add(-time.Second).Truncate(time.Second)}}
}

type harness struct {
	r      *reconciler
	c      client.Client
	api    *fakeAPI
	events *record.FakeRecorder
	now    time.Time
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).
		WithStatusSubresource(&rayv1.RayJob{}, &rayv1.RayCluster{}, &batchv1.Job{}).Build()
	h := &harness{c: c, api: &fakeAPI{jobs: map[string]*raydashboard.JobInfo{}}, events: record.NewFakeRecorder(100)}
	h.r = newReconciler(c, Options{
		Resolver:   func(context.Context, *rayv1.RayCluster) (string, error) { return "http://fake:8265", nil },
		NewJobsAPI: func(string) JobsAPI { return h.api },
		ReconcilerOptions: ctrlset.ReconcilerOptions{
			Recorder: h.events,
			Hooks:    chainhooks.New(Name, nil),
			Now: func() time.Time {
				if !h.now.IsZero() {
					return h.now
				}
				return time.Now()
			},
		},
	})
	return h
}

func (h *harness) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "demo"}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (h *harness) job(t *testing.T) *rayv1.RayJob {
	t.Helper()
	j := &rayv1.RayJob{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "demo"}, j); err != nil {
		t.Fatalf("get RayJob: %v", err)
	}
	return j
}

func (h *harness) exists(t *testing.T, obj client.Object, name string) bool {
	t.Helper()
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func (h *harness) eventsSeen() string {
	var b strings.Builder
	for {
		select {
		case e := <-h.events.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}

func TestStateTransitions(t *testing.T) {
	msg := "Job entrypoint command failed with exit code 3"
	tests := []struct {
		name   string
		job    *rayv1.RayJob
		objs   []client.Object
		jobs   map[string]*raydashboard.JobInfo // what the dashboard knows
		setup  func(*harness)
		passes int
		// want
		deploy   rayv1.JobDeploymentStatus
		status   rayv1.JobStatus
		reason   rayv1.JobFailedReason
		message  string
		submits  int
		check    func(t *testing.T, h *harness, got *rayv1.RayJob)
		wantEvts []string
	}{
		{
			name: "new job fixes its id and cluster name before anything else", job: newJob(),
			deploy: rayv1.JobDeploymentStatusInitializing,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if !strings.HasPrefix(got.Status.JobId, "demo-") || len(got.Status.JobId) != len("demo-")+5 {
					t.Errorf("jobId = %q, want demo-xxxxx", got.Status.JobId)
				}
				if !strings.HasPrefix(got.Status.RayClusterName, "demo-") || got.Status.RayClusterName == got.Status.JobId {
					t.Errorf("rayClusterName = %q", got.Status.RayClusterName)
				}
				if got.Status.StartTime == nil || len(got.Finalizers) != 1 || got.Finalizers[0] != rayparams.FinalizerRayJob {
					t.Errorf("startTime %v finalizers %v", got.Status.StartTime, got.Finalizers)
				}
				if got.Status.ObservedGeneration != 1 {
					t.Errorf("observedGeneration = %d", got.Status.ObservedGeneration)
				}
				if h.exists(t, &rayv1.RayCluster{}, got.Status.RayClusterName) {
					t.Error("cluster created in the same pass as the id was fixed")
				}
			},
		},
		{
			name: "spec.jobId and clusterSelector are taken as given",
			job: newJob(func(j *rayv1.RayJob) {
				j.Spec.JobId = "my-id"
				j.Spec.RayClusterSpec = nil
				j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
			}),
			deploy: rayv1.JobDeploymentStatusInitializing,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if got.Status.JobId != "my-id" || got.Status.RayClusterName != "shared" {
					t.Errorf("jobId %q rayClusterName %q", got.Status.JobId, got.Status.RayClusterName)
				}
			},
		},
		{
			name: "initializing creates the cluster, owned by the RayJob", job: newJob(at(rayv1.JobDeploymentStatusInitializing)),
			deploy:   rayv1.JobDeploymentStatusInitializing,
			wantEvts: []string{"CreatedRayCluster"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				c := &rayv1.RayCluster{}
				if !h.exists(t, c, "demo-xyz12") {
					t.Fatal("no RayCluster demo-xyz12")
				}
				ref := metav1.GetControllerOf(c)
				if ref == nil || ref.Kind != "RayJob" || ref.Name != "demo" {
					t.Errorf("controller ref %+v", ref)
				}
				if c.Labels[rayparams.LabelOriginName] != "demo" || c.Labels[rayparams.LabelOriginatedCRD] != "RayJob" {
					t.Errorf("labels %v", c.Labels)
				}
			},
		},
		{
			name: "initializing waits for a ready cluster and mirrors its status", job: newJob(at(rayv1.JobDeploymentStatusInitializing)),
			objs:   []client.Object{newCluster("demo-xyz12", "")},
			deploy: rayv1.JobDeploymentStatusInitializing,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if got.Status.RayClusterStatus.Head.PodIP != "10.244.0.7" || got.Status.DashboardURL != "" {
					t.Errorf("rayClusterStatus %+v dashboardURL %q", got.Status.RayClusterStatus, got.Status.DashboardURL)
				}
			},
		},
		{
			name: "a ready cluster starts an HTTPMode job", job: newJob(at(rayv1.JobDeploymentStatusInitializing)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusRunning,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if want := "demo-xyz12-head-svc.default.svc.cluster.local:8265"; got.Status.DashboardURL != want {
					t.Errorf("dashboardURL = %q, want %q", got.Status.DashboardURL, want)
				}
				if h.exists(t, &batchv1.Job{}, "demo") {
					t.Error("HTTPMode created a submitter Job")
				}
			},
		},
		{
			name: "a ready cluster gets the K8sJobMode submitter Job", job: newJob(at(rayv1.JobDeploymentStatusInitializing), mode("")),
			objs:     []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy:   rayv1.JobDeploymentStatusRunning,
			wantEvts: []string{"CreatedRayJobSubmitter"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				j := &batchv1.Job{}
				if !h.exists(t, j, "demo") {
					t.Fatal("no submitter Job")
				}
				if ref := metav1.GetControllerOf(j); ref == nil || ref.Name != "demo" || ref.Kind != "RayJob" {
					t.Errorf("owner %+v", ref)
				}
				if args := j.Spec.Template.Spec.Containers[0].Args[0]; !strings.Contains(args, "--submission-id demo-abcde -- echo hi ;") {
					t.Errorf("submitter script %q", args)
				}
			},
		},
		{
			name: "InteractiveMode waits for the user's job id", job: newJob(at(rayv1.JobDeploymentStatusInitializing), mode(rayv1.InteractiveMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusWaiting,
		},
		{
			name: "Waiting without spec.jobId stays", job: newJob(at(rayv1.JobDeploymentStatusWaiting), mode(rayv1.InteractiveMode)),
			deploy: rayv1.JobDeploymentStatusWaiting,
		},
		{
			name:   "Waiting runs once spec.jobId is set",
			job:    newJob(at(rayv1.JobDeploymentStatusWaiting), mode(rayv1.InteractiveMode), func(j *rayv1.RayJob) { j.Spec.JobId = "raysubmit_1" }),
			deploy: rayv1.JobDeploymentStatusRunning,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if got.Status.JobId != "raysubmit_1" {
					t.Errorf("jobId %q", got.Status.JobId)
				}
			},
		},
		{
			name: "HTTPMode submits an unknown job under the fixed id", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusRunning, submits: 1, wantEvts: []string{"SubmittedRayJob", "CreatedService"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if s := h.api.submitted[0]; s.SubmissionID != "demo-abcde" || s.Entrypoint != "echo hi" {
					t.Errorf("submitted %+v", s)
				}
				svc := &corev1.Service{}
				if !h.exists(t, svc, "demo-head-svc") || svc.Spec.Selector[rayparams.LabelCluster] != "demo-xyz12" || svc.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("head service %+v", svc.Spec)
				}
			},
		},
		{
			name: "a taken submission id counts as submitted", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs: []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			setup: func(h *harness) {
				h.api.submitErr = &raydashboard.HTTPError{Code: 500, Body: "Job with submission_id demo-abcde already exists. Please use a different submission_id."}
			},
			deploy: rayv1.JobDeploymentStatusRunning, submits: 1,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if e := h.eventsSeen(); strings.Contains(e, "FailedToSubmit") {
					t.Errorf("already-submitted reported as a failure: %s", e)
				}
			},
		},
		{
			name: "a running Ray job is mirrored", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusRunning, StartTime: ptr.To(time.Now().UnixMilli())}},
			deploy: rayv1.JobDeploymentStatusRunning, status: rayv1.JobStatusRunning,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if got.Status.RayJobStatusInfo.StartTime == nil || got.Status.RayClusterStatus.State != rayv1.Ready {
					t.Errorf("rayJobInfo %+v rayClusterStatus %+v", got.Status.RayJobStatusInfo, got.Status.RayClusterStatus)
				}
			},
		},
		{
			name: "SUCCEEDED completes the RayJob", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusSucceeded, Message: ptr.To("Job finished successfully.")}},
			deploy: rayv1.JobDeploymentStatusComplete, status: rayv1.JobStatusSucceeded, message: "Job finished successfully.",
			wantEvts: []string{"Completed"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if ptr.Deref(got.Status.Succeeded, -1) != 1 || ptr.Deref(got.Status.Failed, -1) != 0 || got.Status.EndTime == nil {
					t.Errorf("succeeded %v failed %v endTime %v", got.Status.Succeeded, got.Status.Failed, got.Status.EndTime)
				}
			},
		},
		{
			name: "FAILED fails the RayJob with the job's message", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusFailed, Message: &msg}},
			deploy: rayv1.JobDeploymentStatusFailed, status: rayv1.JobStatusFailed, reason: rayv1.AppFailed, message: msg,
			wantEvts: []string{"Failed"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if ptr.Deref(got.Status.Failed, -1) != 1 {
					t.Errorf("failed %v", got.Status.Failed)
				}
			},
		},
		{
			name: "FAILED on a node whose pods are offline says so first", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusFailed, Message: &msg}},
			setup:  func(h *harness) { h.r.opts.OfflinePods = true },
			deploy: rayv1.JobDeploymentStatusFailed, status: rayv1.JobStatusFailed, reason: rayv1.AppFailed, message: OfflineNote + msg,
			wantEvts: []string{"Failed"},
		},
		{
			name: "SUCCEEDED on a node whose pods are offline says nothing of it", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusSucceeded, Message: ptr.To("Job finished successfully.")}},
			setup:  func(h *harness) { h.r.opts.OfflinePods = true },
			deploy: rayv1.JobDeploymentStatusComplete, status: rayv1.JobStatusSucceeded, message: "Job finished successfully.",
			wantEvts: []string{"Completed"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if strings.Contains(got.Status.Message, "--pod-egress") {
					t.Errorf("message %q", got.Status.Message)
				}
			},
		},
		{
			name: "STOPPED completes the RayJob", job: newJob(at(rayv1.JobDeploymentStatusRunning)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusStopped}},
			deploy: rayv1.JobDeploymentStatusComplete, status: rayv1.JobStatusStopped,
		},
		{
			name:   "a failure within backoffLimit retries",
			job:    newJob(at(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) }),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusFailed, Message: &msg}},
			deploy: rayv1.JobDeploymentStatusRetrying, status: rayv1.JobStatusFailed, reason: rayv1.AppFailed, message: msg,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if ptr.Deref(got.Status.Failed, -1) != 1 {
					t.Errorf("failed %v", got.Status.Failed)
				}
			},
		},
		{
			name: "retrying deletes the cluster, then starts over on a new one",
			job: newJob(at(rayv1.JobDeploymentStatusRetrying), func(j *rayv1.RayJob) {
				j.Spec.BackoffLimit = ptr.To[int32](1)
				j.Status.Failed = ptr.To[int32](1)
			}),
			objs: []client.Object{newCluster("demo-xyz12", rayv1.Ready)}, passes: 3,
			deploy: rayv1.JobDeploymentStatusInitializing,
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if h.exists(t, &rayv1.RayCluster{}, "demo-xyz12") {
					t.Error("old cluster still there")
				}
				if got.Status.RayClusterName == "demo-xyz12" || got.Status.RayClusterName == "" || got.Status.JobId == "demo-abcde" {
					t.Errorf("retry reuses cluster %q / job id %q", got.Status.RayClusterName, got.Status.JobId)
				}
				if ptr.Deref(got.Status.Failed, -1) != 1 {
					t.Errorf("failed count lost: %v", got.Status.Failed)
				}
			},
		},
		{
			name: "K8sJobMode waits for the submitter after the Ray job ended", job: newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.K8sJobMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready), submitter()},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusSucceeded}},
			deploy: rayv1.JobDeploymentStatusRunning, status: rayv1.JobStatusSucceeded,
		},
		{
			name: "K8sJobMode completes when the submitter has finished", job: newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.K8sJobMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready), submitter(jobCond(batchv1.JobComplete, "Completed"))},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusSucceeded}},
			deploy: rayv1.JobDeploymentStatusComplete, status: rayv1.JobStatusSucceeded,
		},
		{
			name: "a failed submitter fails the RayJob", job: newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.K8sJobMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready), submitter(jobCond(batchv1.JobFailed, "BackoffLimitExceeded"))},
			deploy: rayv1.JobDeploymentStatusFailed, reason: rayv1.SubmissionFailed,
			message: "Job submission has failed. Reason: BackoffLimitExceeded. Message: BackoffLimitExceeded message",
		},
		{
			name:   "a finished submitter whose job the dashboard never saw fails the RayJob",
			job:    newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.K8sJobMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready), submitter(jobCond(batchv1.JobComplete, "Completed"))},
			deploy: rayv1.JobDeploymentStatusFailed, reason: rayv1.AppFailed, message: "Submitter completed but Ray job not found in RayCluster.",
		},
		{
			name: "SidecarMode without a head pod fails", job: newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.SidecarMode)),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusFailed, reason: rayv1.AppFailed, message: "Ray head pod not found.",
		},
		{
			name: "SidecarMode completes when the sidecar exited 0", job: newJob(at(rayv1.JobDeploymentStatusRunning), mode(rayv1.SidecarMode)),
			objs: []client.Object{newCluster("demo-xyz12", rayv1.Ready), &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "demo-xyz12-head", Namespace: ns, Labels: map[string]string{rayparams.LabelCluster: "demo-xyz12", rayparams.LabelNodeType: "head"}},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: rayparams.SubmitterContainerName,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.Now()}}}}},
			}},
			jobs:   map[string]*raydashboard.JobInfo{"demo-abcde": {Status: raydashboard.StatusSucceeded}},
			deploy: rayv1.JobDeploymentStatusComplete, status: rayv1.JobStatusSucceeded,
		},
		{
			name: "activeDeadlineSeconds fails the RayJob for good",
			job: newJob(at(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
				j.Spec.ActiveDeadlineSeconds = ptr.To[int32](5)
				j.Spec.BackoffLimit = ptr.To[int32](3)
			}),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusFailed, reason: rayv1.DeadlineExceeded, message: "The RayJob has passed the activeDeadlineSeconds",
		},
		{
			name:   "activeDeadlineSeconds also applies while initializing",
			job:    newJob(at(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) { j.Spec.ActiveDeadlineSeconds = ptr.To[int32](5) }),
			deploy: rayv1.JobDeploymentStatusFailed, reason: rayv1.DeadlineExceeded,
		},
		{
			name: "suspend moves a running job to Suspending",
			job: newJob(at(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
				j.Spec.Suspend, j.Spec.ShutdownAfterJobFinishes = true, true
			}),
			objs:   []client.Object{newCluster("demo-xyz12", rayv1.Ready)},
			deploy: rayv1.JobDeploymentStatusSuspending,
		},
		{
			name: "suspending deletes cluster and submitter, then resets",
			job: newJob(at(rayv1.JobDeploymentStatusSuspending), mode(rayv1.K8sJobMode), func(j *rayv1.RayJob) {
				j.Spec.Suspend, j.Spec.ShutdownAfterJobFinishes = true, true
				j.Status.JobStatus = rayv1.JobStatusRunning
			}),
			objs: []client.Object{newCluster("demo-xyz12", rayv1.Ready), submitter()}, passes: 2,
			deploy: rayv1.JobDeploymentStatusSuspended, status: rayv1.JobStatusNew,
			wantEvts: []string{"DeletedRayCluster", "DeletedRayJobSubmitter"},
			check: func(t *testing.T, h *harness, got *rayv1.RayJob) {
				if h.exists(t, &rayv1.RayCluster{}, "demo-xyz12") || h.exists(t, &batchv1.Job{}, "demo") {
					t.Error("cluster or submitter left behind")
				}
				if got.Status.JobId != "" || got.Status.RayClusterName != "" || got.Status.DashboardURL != "" {
					t.Errorf("status not reset: %+v", got.Status)
				}
			},
		},
		{
			name: "unsuspending starts over",
			job: newJob(at(rayv1.JobDeploymentStatusSuspended), func(j *rayv1.RayJob) {
				j.Spec.ShutdownAfterJobFinishes = true
				j.Status.JobId, j.Status.RayClusterName = "", ""
			}),
			deploy: rayv1.JobDeploymentStatusNew,
		},
		{
			name: "a spec without cluster fails validation",
			job: newJob(func(j *rayv1.RayJob) {
				j.Spec.RayClusterSpec = nil
			}),
			deploy: rayv1.JobDeploymentStatusValidationFailed, reason: rayv1.ValidationFailed,
			message: "one of RayClusterSpec or ClusterSelector must be set", wantEvts: []string{"InvalidRayJobSpec"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, append([]client.Object{tc.job}, tc.objs...)...)
			for id, info := range tc.jobs {
				h.api.jobs[id] = info
			}
			if tc.setup != nil {
				tc.setup(h)
			}
			passes := max(tc.passes, 1)
			for range passes {
				h.reconcile(t)
			}
			got := h.job(t)
			st := got.Status
			if st.JobDeploymentStatus != tc.deploy {
				t.Errorf("jobDeploymentStatus = %q, want %q (message %q)", st.JobDeploymentStatus, tc.deploy, st.Message)
			}
			if st.JobStatus != tc.status {
				t.Errorf("jobStatus = %q, want %q", st.JobStatus, tc.status)
			}
			if st.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", st.Reason, tc.reason)
			}
			if !strings.Contains(st.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", st.Message, tc.message)
			}
			if len(h.api.submitted) != tc.submits {
				t.Errorf("%d submissions, want %d", len(h.api.submitted), tc.submits)
			}
			events := h.eventsSeen()
			for _, e := range tc.wantEvts {
				if !strings.Contains(events, " "+e+" ") {
					t.Errorf("no %s event in:\n%s", e, events)
				}
			}
			if tc.check != nil {
				tc.check(t, h, got)
			}
		})
	}
}

// The whole HTTPMode life, pass after pass: one submission however many
// passes run, and a repeat of every pass is harmless.
func TestHTTPModeLifecycleSubmitsOnce(t *testing.T) {
	h := newHarness(t, newJob(), newCluster("", ""))
	step := func(n int) *rayv1.RayJob {
		for range n {
			h.reconcile(t)
		}
		return h.job(t)
	}
	got := step(2)
	if got.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
		t.Fatalf("after 2 passes: %q", got.Status.JobDeploymentStatus)
	}
	// The cluster comes up.
	c := &rayv1.RayCluster{}
	if !h.exists(t, c, got.Status.RayClusterName) {
		t.Fatal("no cluster")
	}
	c.Status = rayv1.RayClusterStatus{State: rayv1.Ready, Head: rayv1.HeadInfo{PodIP: "10.244.0.9"}}
	if err := h.c.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got = step(5)
	if n := len(h.api.submitted); n != 1 {
		t.Fatalf("%d submissions after 5 passes, want 1", n)
	}
	if got.Status.JobStatus != rayv1.JobStatusPending || got.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("status %q/%q", got.Status.JobDeploymentStatus, got.Status.JobStatus)
	}
	h.api.jobs[got.Status.JobId].Status = raydashboard.StatusSucceeded
	got = step(3)
	if got.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || len(h.api.submitted) != 1 {
		t.Fatalf("status %q, %d submissions", got.Status.JobDeploymentStatus, len(h.api.submitted))
	}
	if ptr.Deref(got.Status.Succeeded, 0) != 1 {
		t.Errorf("succeeded = %v after extra passes, want 1", got.Status.Succeeded)
	}
}

func TestShutdownAfterJobFinishesHonoursTTL(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	job := newJob(at(rayv1.JobDeploymentStatusComplete), func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = true
		j.Spec.TTLSecondsAfterFinished = 60
		j.Status.JobStatus = rayv1.JobStatusSucceeded
		j.Status.EndTime = &metav1.Time{Time: end}
	})
	h := newHarness(t, job, newCluster("demo-xyz12", rayv1.Ready))
	h.now = end.Add(20 * time.Second)
	res := h.reconcile(t)
	if !h.exists(t, &rayv1.RayCluster{}, "demo-xyz12") {
		t.Fatal("cluster deleted before the TTL")
	}
	if res.RequeueAfter < 40*time.Second || res.RequeueAfter > 45*time.Second {
		t.Errorf("requeue after %v, want about 40 s", res.RequeueAfter)
	}
	h.now = end.Add(61 * time.Second)
	h.reconcile(t)
	if h.exists(t, &rayv1.RayCluster{}, "demo-xyz12") {
		t.Fatal("cluster still there after the TTL")
	}
}

func TestSelectedClusterIsNeverDeleted(t *testing.T) {
	for _, st := range []rayv1.JobDeploymentStatus{rayv1.JobDeploymentStatusComplete, rayv1.JobDeploymentStatusRetrying} {
		t.Run(string(st), func(t *testing.T) {
			job := newJob(at(st), func(j *rayv1.RayJob) {
				j.Spec.RayClusterSpec = nil
				j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
				j.Spec.ShutdownAfterJobFinishes = true
				j.Spec.BackoffLimit = ptr.To[int32](2)
				j.Status.RayClusterName = "shared"
				j.Status.EndTime = &metav1.Time{Time: time.Now().Add(-time.Hour)}
			})
			h := newHarness(t, job, newCluster("shared", rayv1.Ready))
			h.reconcile(t)
			h.reconcile(t)
			if !h.exists(t, &rayv1.RayCluster{}, "shared") {
				t.Fatal("the selected cluster was deleted")
			}
		})
	}
}

func TestDeletionStopsARunningJob(t *testing.T) {
	job := newJob(at(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Status.JobStatus = rayv1.JobStatusRunning
		j.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	})
	h := newHarness(t, job, newCluster("demo-xyz12", rayv1.Ready))
	h.reconcile(t)
	if len(h.api.stopped) != 1 || h.api.stopped[0] != "demo-abcde" {
		t.Errorf("stopped %v", h.api.stopped)
	}
	if h.exists(t, &rayv1.RayJob{}, "demo") {
		t.Error("RayJob still there: finalizer not removed")
	}
}

// TestSelectedK8sTokenAuthCluster: a RayJob whose clusterSelector names a RayCluster with
// enableK8sTokenAuth fails validation once, with a message naming the field, and gets no submitter
// (it would have no token to submit with), however many passes run; from Running too.
func TestSelectedK8sTokenAuthCluster(t *testing.T) {
	for _, st := range []rayv1.JobDeploymentStatus{rayv1.JobDeploymentStatusInitializing, rayv1.JobDeploymentStatusRunning} {
		t.Run(string(st), func(t *testing.T) {
			job := newJob(at(st), mode(rayv1.K8sJobMode), func(j *rayv1.RayJob) {
				j.Spec.RayClusterSpec = nil
				j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
				j.Status.RayClusterName = "shared"
			})
			shared := newCluster("shared", rayv1.Ready)
			shared.Spec.RayVersion = "2.60.0"
			shared.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
			h := newHarness(t, job, shared)
			for range 3 {
				h.reconcile(t)
			}
			got := h.job(t).Status
			if got.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || got.Reason != rayv1.ValidationFailed ||
				!strings.Contains(got.Message, "clusterSelector") || !strings.Contains(got.Message, "authOptions.enableK8sTokenAuth") {
				t.Errorf("status %q reason %q message %q; want ValidationFailed naming clusterSelector and the field",
					got.JobDeploymentStatus, got.Reason, got.Message)
			}
			if events := h.eventsSeen(); strings.Count(events, "InvalidRayJobSpec") != 1 {
				t.Errorf("want one InvalidRayJobSpec event, got:\n%s", events)
			}
			if h.exists(t, &batchv1.Job{}, "demo") {
				t.Error("a submitter was created for a cluster it has no token for")
			}
			if !h.exists(t, &rayv1.RayCluster{}, "shared") {
				t.Error("the selected cluster was deleted")
			}
		})
	}
}
