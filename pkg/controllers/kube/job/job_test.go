package job_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/gc"
	"github.com/rayctl/rayctl/pkg/controllers/kube/job"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, "manager", func(i *framework.Instance) (func(context.Context) error, error) {
		in = i
		skip := true
		mgr, err := ctrl.NewManager(in.Config, ctrl.Options{
			Metrics:    metricsserver.Options{BindAddress: "0"},
			Controller: ctrlconfig.Controller{SkipNameValidation: &skip},
		})
		if err == nil {
			err = job.Options{BackoffBase: 100 * time.Millisecond}.Setup(mgr, ctrlset.Env{Name: job.Name}.Complete(mgr))
		}
		if err == nil {
			err = gc.Setup(mgr, ctrlset.Env{})
		}
		if err != nil {
			return nil, err
		}
		return mgr.Start, nil
	})
}

// newJob is a Job whose pods no scheduler binds: the test plays the kubelet by writing their status.
func newJob(name string, mutate func(*batchv1.JobSpec)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SchedulerName: "no-such-scheduler",
			Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"true"}}},
		}}},
	}
	mutate(&j.Spec)
	return j
}

func createJob(t *testing.T, ctx context.Context, ns string, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got, err := in.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
	framework.Must(t, "creating the job", err)
	return got
}

// jobPods lists the pods of job, by its controller-uid label.
func jobPods(ctx context.Context, j *batchv1.Job) ([]corev1.Pod, error) {
	list, err := in.Client.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func running(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// finish plays the kubelet: it ends pod with phase.
func finish(t *testing.T, ctx context.Context, pod corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	pod.Status.Phase = phase
	_, err := in.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
	framework.Must(t, "writing the status of pod "+pod.Name, err)
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// waitJob waits until cond holds for the job and returns it.
func waitJob(t *testing.T, ctx context.Context, j *batchv1.Job, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	framework.WaitFor(t, ctx, what, func() (bool, error) {
		var err error
		got, err = in.Client.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		return err == nil && cond(got), err
	})
	return got
}

// watchJob follows j through a watch from the version createJob returned until cond holds, so no
// version is missed however briefly it lasts; it fails if the Job is deleted first.
func watchJob(t *testing.T, ctx context.Context, j *batchv1.Job, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	w, err := in.Client.BatchV1().Jobs(j.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", j.Name).String(), ResourceVersion: j.ResourceVersion})
	framework.Must(t, "watching the job", err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		got, ok := ev.Object.(*batchv1.Job)
		switch {
		case !ok:
			continue
		case ev.Type == watch.Deleted:
			t.Fatalf("%s: the Job was deleted first", what)
		case cond(got):
			return got
		}
	}
	t.Fatalf("%s: not in time (the watch ended: %v)", what, ctx.Err())
	return nil
}

func TestCompletionsOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("two", func(s *batchv1.JobSpec) { s.Completions, s.Parallelism = ptr(int32(2)), ptr(int32(1)) }))

	for round := 1; round <= 2; round++ {
		var pods []corev1.Pod
		framework.WaitFor(t, ctx, fmt.Sprintf("pod %d to be created", round), func() (bool, error) {
			var err error
			pods, err = jobPods(ctx, j)
			return len(pods) == round, err
		})
		active := running(pods)
		if len(active) != 1 {
			t.Fatalf("round %d: %d pods running, want 1 (parallelism 1)", round, len(active))
		}
		p := active[0]
		if !strings.HasPrefix(p.Name, "two-") || !metav1.IsControlledBy(&p, j) || p.Labels[batchv1.JobNameLabel] != "two" {
			t.Errorf("pod %s: want name two-*, the job as controller and job-name label; got owners %v labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
		waitJob(t, ctx, j, "status.active=1", func(j *batchv1.Job) bool { return j.Status.Active == 1 && j.Status.StartTime != nil })
		finish(t, ctx, p, corev1.PodSucceeded)
	}
	got := waitJob(t, ctx, j, "the job to complete", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if got.Status.Succeeded != 2 || got.Status.Active != 0 || got.Status.Failed != 0 || got.Status.CompletionTime == nil {
		t.Errorf("status: succeeded %d active %d failed %d completionTime %v; want 2, 0, 0, set",
			got.Status.Succeeded, got.Status.Active, got.Status.Failed, got.Status.CompletionTime)
	}
	if jobCondition(got, batchv1.JobSuccessCriteriaMet) == nil {
		t.Errorf("no SuccessCriteriaMet condition: %+v", got.Status.Conditions)
	}
	pods, err := jobPods(ctx, j)
	framework.Must(t, "listing pods", err)
	if len(pods) != 2 {
		t.Errorf("%d pods, want 2 (completed pods stay with their job)", len(pods))
	}
	waitEvent(t, ctx, j, "Completed")
}

func TestBackoffLimitExceeded(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("fails", func(s *batchv1.JobSpec) { s.BackoffLimit = ptr(int32(1)) }))
	for failures := 1; failures <= 2; failures++ {
		var pods []corev1.Pod
		framework.WaitFor(t, ctx, fmt.Sprintf("attempt %d", failures), func() (bool, error) {
			var err error
			pods, err = jobPods(ctx, j)
			return len(pods) == failures && len(running(pods)) == 1, err
		})
		finish(t, ctx, running(pods)[0], corev1.PodFailed)
	}
	got := waitJob(t, ctx, j, "the job to fail", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) != nil })
	if c := jobCondition(got, batchv1.JobFailed); c.Reason != "BackoffLimitExceeded" {
		t.Errorf("Failed reason %q, want BackoffLimitExceeded", c.Reason)
	}
	if c := jobCondition(got, batchv1.JobFailureTarget); c == nil || c.Reason != "BackoffLimitExceeded" {
		t.Errorf("FailureTarget condition %+v, want reason BackoffLimitExceeded", c)
	}
	if got.Status.Failed != 2 || got.Status.Active != 0 {
		t.Errorf("failed %d active %d, want 2 and 0", got.Status.Failed, got.Status.Active)
	}
	time.Sleep(500 * time.Millisecond)
	pods, err := jobPods(ctx, j)
	framework.Must(t, "listing pods", err)
	if len(pods) != 2 {
		t.Errorf("%d pods after failure, want 2 (no retry past the limit)", len(pods))
	}
	waitEvent(t, ctx, j, "BackoffLimitExceeded")
}

func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("slow", func(s *batchv1.JobSpec) {
		s.ActiveDeadlineSeconds, s.Parallelism = ptr(int64(2)), ptr(int32(2))
	}))
	framework.WaitFor(t, ctx, "two pods running", func() (bool, error) {
		pods, err := jobPods(ctx, j)
		return len(running(pods)) == 2, err
	})
	got := waitJob(t, ctx, j, "the job to fail on its deadline", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobFailed) != nil })
	if c := jobCondition(got, batchv1.JobFailed); c.Reason != "DeadlineExceeded" {
		t.Errorf("Failed reason %q, want DeadlineExceeded", c.Reason)
	}
	if d := jobCondition(got, batchv1.JobFailed).LastTransitionTime.Sub(got.Status.StartTime.Time); d < 2*time.Second {
		t.Errorf("failed %s after start, before the 2 s deadline", d)
	}
	pods, err := jobPods(ctx, j)
	framework.Must(t, "listing pods", err)
	if len(pods) != 0 {
		t.Errorf("%d pods left after the deadline, want their deletion", len(pods))
	}
}

func TestTTLAfterFinished(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("ttl", func(s *batchv1.JobSpec) { s.TTLSecondsAfterFinished = ptr(int32(1)) }))
	var pods []corev1.Pod
	framework.WaitFor(t, ctx, "the pod", func() (bool, error) {
		var err error
		pods, err = jobPods(ctx, j)
		return len(pods) == 1, err
	})
	finish(t, ctx, pods[0], corev1.PodSucceeded)
	// Watched rather than polled: with a 1 s TTL, a poll on a busy machine can miss the completed Job.
	done := watchJob(t, ctx, j, "the job to complete", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	framework.WaitFor(t, ctx, "the job to be deleted after its TTL", func() (bool, error) {
		_, err := in.Client.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), framework.IgnoreNotFound(err)
	})
	if d := time.Since(done.Status.CompletionTime.Time); d < time.Second-100*time.Millisecond {
		t.Errorf("deleted %s after completion, before its 1 s TTL", d)
	}
	framework.WaitFor(t, ctx, "its pod to be collected", func() (bool, error) {
		pods, err := jobPods(ctx, j)
		return len(pods) == 0, err
	})
}

func TestNoDuplicatePodsUnderRapidEvents(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("busy", func(s *batchv1.JobSpec) {
		s.Completions, s.Parallelism = ptr(int32(5)), ptr(int32(5))
	}))
	// Stir: many Job updates and pod status writes while the controller creates pods.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.rayctl.io/stir":"%d"}}}`, i)
			_, _ = in.Client.BatchV1().Jobs(ns).Patch(ctx, j.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			pods, _ := jobPods(ctx, j)
			for _, p := range pods {
				p.Status.Conditions = []corev1.PodCondition{{Type: "e2e.rayctl.io/Stir", Status: corev1.ConditionTrue, Reason: fmt.Sprint("R", i)}}
				_, _ = in.Client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
			}
		}
	})
	var pods []corev1.Pod
	framework.WaitFor(t, ctx, "five pods", func() (bool, error) {
		var err error
		pods, err = jobPods(ctx, j)
		return len(pods) >= 5, err
	})
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	pods, err := jobPods(ctx, j)
	framework.Must(t, "listing pods", err)
	if len(pods) != 5 {
		t.Fatalf("%d pods, want exactly 5", len(pods))
	}
	for _, p := range pods {
		finish(t, ctx, p, corev1.PodSucceeded)
	}
	got := waitJob(t, ctx, j, "the job to complete", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if got.Status.Succeeded != 5 {
		t.Errorf("succeeded %d, want 5", got.Status.Succeeded)
	}
}

func TestIndexed(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	mode := batchv1.IndexedCompletion
	j := createJob(t, ctx, ns, newJob("idx", func(s *batchv1.JobSpec) {
		s.Completions, s.Parallelism, s.CompletionMode = ptr(int32(3)), ptr(int32(3)), &mode
	}))
	var pods []corev1.Pod
	framework.WaitFor(t, ctx, "three pods", func() (bool, error) {
		var err error
		pods, err = jobPods(ctx, j)
		return len(pods) == 3, err
	})
	seen := map[string]bool{}
	for _, p := range pods {
		idx := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[idx] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != idx || !strings.HasPrefix(p.Name, "idx-"+idx+"-") || p.Spec.Hostname != "idx-"+idx {
			t.Errorf("pod %s: index label, name or hostname does not match index %q", p.Name, idx)
		}
		env := p.Spec.Containers[0].Env
		if len(env) == 0 || env[len(env)-1].Name != "JOB_COMPLETION_INDEX" || env[len(env)-1].Value != idx {
			t.Errorf("pod %s: env %v lacks JOB_COMPLETION_INDEX=%s", p.Name, env, idx)
		}
	}
	if !seen["0"] || !seen["1"] || !seen["2"] {
		t.Fatalf("indexes %v, want 0, 1 and 2", seen)
	}
	// Index 1 fails once and is retried under the same index.
	for _, p := range pods {
		phase := corev1.PodSucceeded
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "1" {
			phase = corev1.PodFailed
		}
		finish(t, ctx, p, phase)
	}
	waitJob(t, ctx, j, "indexes 0 and 2 completed", func(j *batchv1.Job) bool { return j.Status.CompletedIndexes == "0,2" })
	framework.WaitFor(t, ctx, "index 1 retried", func() (bool, error) {
		pods, err := jobPods(ctx, j)
		r := running(pods)
		if len(r) == 1 && r[0].Annotations[batchv1.JobCompletionIndexAnnotation] == "1" {
			finish(t, ctx, r[0], corev1.PodSucceeded)
			return true, nil
		}
		return false, err
	})
	got := waitJob(t, ctx, j, "the job to complete", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if got.Status.CompletedIndexes != "0-2" || got.Status.Succeeded != 3 || got.Status.Failed != 1 {
		t.Errorf("completedIndexes %q succeeded %d failed %d, want 0-2, 3, 1", got.Status.CompletedIndexes, got.Status.Succeeded, got.Status.Failed)
	}
}

func TestSuspend(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	ns := in.NewNamespace(t, ctx, "job-")
	j := createJob(t, ctx, ns, newJob("later", func(s *batchv1.JobSpec) { s.Suspend = ptr(true) }))
	waitJob(t, ctx, j, "the Suspended condition", func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobSuspended) != nil })
	if pods, err := jobPods(ctx, j); err != nil || len(pods) != 0 {
		t.Fatalf("a suspended job has %d pods (%v)", len(pods), err)
	}
	_, err := in.Client.BatchV1().Jobs(ns).Patch(ctx, j.Name, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{})
	framework.Must(t, "resuming", err)
	framework.WaitFor(t, ctx, "a pod once resumed", func() (bool, error) {
		pods, err := jobPods(ctx, j)
		return len(pods) == 1, err
	})
	waitJob(t, ctx, j, "Suspended=False", func(j *batchv1.Job) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobSuspended {
				return c.Status == corev1.ConditionFalse && j.Status.Active == 1
			}
		}
		return false
	})
}

// waitEvent waits for an event with reason about the job.
func waitEvent(t *testing.T, ctx context.Context, j *batchv1.Job, reason string) {
	t.Helper()
	framework.WaitFor(t, ctx, "event "+reason, func() (bool, error) {
		evs, err := in.Client.CoreV1().Events(j.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == j.UID && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

func ptr[T any](v T) *T { return &v }
