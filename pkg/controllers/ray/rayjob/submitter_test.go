package rayjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

func submitterFixture(mut ...func(*rayv1.RayJob)) *rayv1.RayJob {
	j := newJob(func(j *rayv1.RayJob) {
		j.Spec.SubmissionMode = rayv1.K8sJobMode
		j.Spec.Entrypoint = "python /home/ray/samples/sample_code.py"
		j.Status.JobId = "demo-abcde"
		j.Status.DashboardURL = "demo-xyz12-head-svc.default.svc.cluster.local:8265"
	})
	for _, m := range mut {
		m(j)
	}
	return j
}

func TestSubmitCommand(t *testing.T) {
	const addr = "http://demo-xyz12-head-svc.default.svc.cluster.local:8265"
	tests := []struct {
		name string
		job  *rayv1.RayJob
		mode rayv1.JobSubmissionMode
		want string
	}{
		{
			name: "K8sJobMode checks, submits without waiting, then follows",
			job:  submitterFixture(), mode: rayv1.K8sJobMode,
			want: "if ! ray job status --address " + addr + " demo-abcde >/dev/null 2>&1 ; then " +
				"ray job submit --address " + addr + " --no-wait --submission-id demo-abcde -- python /home/ray/samples/sample_code.py ; " +
				"fi ; ray job logs --address " + addr + " --follow demo-abcde",
		},
		{
			name: "K8sJobMode with every option",
			job: submitterFixture(func(j *rayv1.RayJob) {
				j.Spec.RuntimeEnvYAML = "env_vars:\n  A: b\n"
				j.Spec.Metadata = map[string]string{"team": "ml"}
				j.Spec.EntrypointNumCpus = 1
				j.Spec.EntrypointNumGpus = 0.5
				j.Spec.EntrypointResources = `{"disk": 1}`
				j.Spec.Entrypoint = "  echo hi  "
			}),
			mode: rayv1.K8sJobMode,
			want: "if ! ray job status --address " + addr + " demo-abcde >/dev/null 2>&1 ; then " +
				"ray job submit --address " + addr + ` --no-wait --runtime-env-json "{\"env_vars\":{\"A\":\"b\"}}" --metadata-json "{\"team\":\"ml\"}"` +
				` --submission-id demo-abcde --entrypoint-num-cpus 1.000000 --entrypoint-num-gpus 0.500000 --entrypoint-resources "{\"disk\": 1}" -- echo hi ; ` +
				"fi ; ray job logs --address " + addr + " --follow demo-abcde",
		},
		{
			name: "SidecarMode waits for the local GCS and submits to 127.0.0.1",
			job:  submitterFixture(), mode: rayv1.SidecarMode,
			want: `until wget --tries 1 -T 10 -q -O- http://localhost:8265/api/gcs_healthz | grep success >/dev/null 2>&1 ; ` +
				`do echo "Waiting for Ray Dashboard GCS to become healthy at http://127.0.0.1:8265 ..." ; sleep 2 ; done ; ` +
				"ray job submit --address http://127.0.0.1:8265 --submission-id demo-abcde -- python /home/ray/samples/sample_code.py ;",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			words, err := SubmitCommand(tc.job, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(words, " "); got != tc.want {
				t.Errorf("script\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestSubmitCommandRefusesMetadataOnOldRay(t *testing.T) {
	j := submitterFixture(func(j *rayv1.RayJob) {
		j.Spec.Metadata = map[string]string{"a": "b"}
		j.Spec.RayClusterSpec.RayVersion = "2.5.1"
	})
	if _, err := SubmitCommand(j, rayv1.K8sJobMode); err == nil || !strings.Contains(err.Error(), "2.6.0") {
		t.Fatalf("err = %v, want a Ray version error", err)
	}
}

func TestSubmitterJob(t *testing.T) {
	j := submitterFixture()
	cluster := newCluster("demo-xyz12", rayv1.Ready)
	job, err := SubmitterJob(j, cluster, false)
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "demo" || job.Namespace != ns {
		t.Errorf("name %s/%s", job.Namespace, job.Name)
	}
	if job.Labels[rayparams.LabelOriginName] != "demo" || job.Labels[rayparams.LabelOriginatedCRD] != "RayJob" || job.Labels[rayparams.LabelCreatedBy] != "kuberay-operator" {
		t.Errorf("labels %v", job.Labels)
	}
	if ptr.Deref(job.Spec.BackoffLimit, -1) != 2 {
		t.Errorf("backoffLimit %v", job.Spec.BackoffLimit)
	}
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("pod spec %+v", pod)
	}
	c := pod.Containers[0]
	if c.Name != rayparams.SubmitterContainerName || c.Image != "rayctl.local/raysim:latest" {
		t.Errorf("container %s image %s", c.Name, c.Image)
	}
	if strings.Join(c.Command, " ") != "/bin/bash -ce --" || len(c.Args) != 1 || !strings.HasPrefix(c.Args[0], "if ! ray job status") {
		t.Errorf("command %q args %q", c.Command, c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env[EnvSubmissionID] != "demo-abcde" || env[EnvDashboardAddress] != j.Status.DashboardURL || env["PYTHONUNBUFFERED"] != "1" {
		t.Errorf("env %v", env)
	}
}

func TestSubmitterJobKeepsATemplatesCommand(t *testing.T) {
	j := submitterFixture(func(j *rayv1.RayJob) {
		j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "mine", Image: "custom", Command: []string{"sh", "-c", "ray job submit --submission-id $RAY_JOB_SUBMISSION_ID -- true"}}},
		}}
		j.Spec.SubmitterConfig = &rayv1.SubmitterConfig{BackoffLimit: ptr.To[int32](0)}
	})
	job, err := SubmitterJob(j, newCluster("demo-xyz12", rayv1.Ready), false)
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if c.Name != "mine" || c.Command[0] != "sh" || len(c.Args) != 0 {
		t.Errorf("template's container changed: %+v", c)
	}
	if ptr.Deref(job.Spec.BackoffLimit, -1) != 0 {
		t.Errorf("backoffLimit %v, want submitterConfig's 0", job.Spec.BackoffLimit)
	}
	if c.Env[len(c.Env)-1].Name != EnvSubmissionID {
		t.Errorf("env %v lacks %s", c.Env, EnvSubmissionID)
	}
}

func TestSidecarModeClusterHasTheSubmitter(t *testing.T) {
	h := newHarness(t)
	p := &pass{r: h.r, job: submitterFixture(func(j *rayv1.RayJob) { j.Spec.SubmissionMode = rayv1.SidecarMode })}
	c, err := p.newCluster("demo-xyz12")
	if err != nil {
		t.Fatal(err)
	}
	head := c.Spec.HeadGroupSpec.Template.Spec
	if len(head.Containers) != 2 || head.Containers[1].Name != rayparams.SubmitterContainerName || head.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("head pod spec: %d containers, restartPolicy %q", len(head.Containers), head.RestartPolicy)
	}
	if !strings.Contains(head.Containers[1].Args[0], "ray job submit --address http://127.0.0.1:8265") {
		t.Errorf("sidecar script %q", head.Containers[1].Args[0])
	}
}
