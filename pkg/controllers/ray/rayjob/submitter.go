package rayjob

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Environment variables KubeRay gives the submitter container.
const (
	EnvDashboardAddress = "RAY_DASHBOARD_ADDRESS"
	EnvSubmissionID     = "RAY_JOB_SUBMISSION_ID"
	envPythonUnbuffered = "PYTHONUNBUFFERED"
)

// defaultSubmitterBackoffLimit caps retries of the submitter Job's pod.
const defaultSubmitterBackoffLimit = 2

// gcsHealthWaitTimeout is wget's -T in the sidecar's wait loop (KubeRay reuses
// its readiness probe's failure threshold there).
const gcsHealthWaitTimeout = 10

// SubmitCommand returns the shell words of the submitter for mode (K8sJobMode
// or SidecarMode), in the form KubeRay 1.5 builds: joined with spaces they are
// the script run by `/bin/bash -ce --`.
//
// K8sJobMode checks `ray job status` first so that a retried submitter pod
// never submits twice, submits with --no-wait, then follows the logs:
//
//	if ! ray job status --address http://ADDR ID >/dev/null 2>&1 ; then ray job submit --address http://ADDR --no-wait [opts] --submission-id ID -- ENTRYPOINT ; fi ; ray job logs --address http://ADDR --follow ID
//
// SidecarMode waits for the head's GCS health endpoint on localhost, then
// submits and waits for the job:
//
//	until wget … http://localhost:PORT/api/gcs_healthz | grep success >/dev/null 2>&1 ; do echo "Waiting …" ; sleep 2 ; done ; ray job submit --address http://127.0.0.1:PORT [opts] --submission-id ID -- ENTRYPOINT ;
//
// As in KubeRay, the entrypoint is pasted into the script unquoted, so shell
// operators in it (&&, ;) are read by the submitter's shell; wrap such an
// entrypoint in `sh -c '…'`.
func SubmitCommand(job *rayv1.RayJob, mode rayv1.JobSubmissionMode) ([]string, error) {
	var address string
	port := int32(rayparams.DefaultDashboardPort)
	switch mode {
	case rayv1.SidecarMode:
		if job.Spec.RayClusterSpec == nil {
			return nil, fmt.Errorf("SidecarMode needs spec.rayClusterSpec")
		}
		port = rayparams.DashboardPort(job.Spec.RayClusterSpec)
		address = "http://127.0.0.1:" + strconv.Itoa(int(port))
	case rayv1.K8sJobMode:
		address = job.Status.DashboardURL
		if !strings.HasPrefix(address, "http://") {
			address = "http://" + address
		}
	default:
		return nil, fmt.Errorf("no submitter command for submission mode %q", mode)
	}
	id := job.Status.JobId

	var cmd []string
	if mode == rayv1.SidecarMode {
		health := fmt.Sprintf("wget --tries 1 -T %d -q -O- http://localhost:%d/%s | grep success", gcsHealthWaitTimeout, port, "api/gcs_healthz")
		cmd = append(cmd, "until", health, ">/dev/null", "2>&1", ";",
			"do", "echo", strconv.Quote("Waiting for Ray Dashboard GCS to become healthy at "+address+" ..."), ";", "sleep", "2", ";", "done", ";")
	}
	if mode == rayv1.K8sJobMode {
		cmd = append(cmd, "if", "!", "ray", "job", "status", "--address", address, id, ">/dev/null", "2>&1", ";", "then")
	}
	cmd = append(cmd, "ray", "job", "submit", "--address", address)
	if mode == rayv1.K8sJobMode {
		cmd = append(cmd, "--no-wait")
	}
	envJSON, err := runtimeEnvJSON(job.Spec.RuntimeEnvYAML)
	if err != nil {
		return nil, err
	}
	if envJSON != "" {
		cmd = append(cmd, "--runtime-env-json", strconv.Quote(envJSON))
	}
	if len(job.Spec.Metadata) > 0 && job.Spec.RayClusterSpec != nil {
		if !rayVersionAtLeast(job.Spec.RayClusterSpec.RayVersion, 2, 6) {
			return nil, fmt.Errorf("the Ray version must be at least 2.6.0 to use the metadata field (rayVersion is %q)", job.Spec.RayClusterSpec.RayVersion)
		}
		b, err := json.Marshal(job.Spec.Metadata)
		if err != nil {
			return nil, err
		}
		cmd = append(cmd, "--metadata-json", strconv.Quote(string(b)))
	}
	if id != "" {
		cmd = append(cmd, "--submission-id", id)
	}
	if n := job.Spec.EntrypointNumCpus; n > 0 {
		cmd = append(cmd, "--entrypoint-num-cpus", fmt.Sprintf("%f", n))
	}
	if n := job.Spec.EntrypointNumGpus; n > 0 {
		cmd = append(cmd, "--entrypoint-num-gpus", fmt.Sprintf("%f", n))
	}
	if r := job.Spec.EntrypointResources; r != "" {
		cmd = append(cmd, "--entrypoint-resources", strconv.Quote(r))
	}
	cmd = append(cmd, "--", strings.TrimSpace(job.Spec.Entrypoint), ";")
	if mode == rayv1.K8sJobMode {
		cmd = append(cmd, "fi", ";", "ray", "job", "logs", "--address", address, "--follow", id)
	}
	return cmd, nil
}

// rayVersionAtLeast reports whether a "major.minor.patch" version is at least major.minor.
func rayVersionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// defaultSubmitterContainer runs in the head's image, to match its Ray version.
func defaultSubmitterContainer(spec *rayv1.RayClusterSpec) corev1.Container {
	c := corev1.Container{
		Name: rayparams.SubmitterContainerName,
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1"),
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			},
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("500m"),
				corev1.ResourceMemory: resource.MustParse("200Mi"),
			},
		},
	}
	if h := rayparams.HeadContainer(spec); h != nil {
		c.Image = h.Image
	}
	return c
}

// configureSubmitter gives c the submit script (unless a K8sJobMode template
// brought its own command) and the environment KubeRay sets, with the token of
// the cluster named cluster when its Ray requires one (auth).
func configureSubmitter(c *corev1.Container, job *rayv1.RayJob, mode rayv1.JobSubmissionMode, cluster string, spec *rayv1.RayClusterSpec, auth bool) error {
	words, err := SubmitCommand(job, mode)
	if err != nil {
		return err
	}
	if len(c.Command) == 0 || mode == rayv1.SidecarMode {
		c.Command = []string{"/bin/bash", "-ce", "--"}
		c.Args = []string{strings.Join(words, " ")}
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: envPythonUnbuffered, Value: "1"},
		corev1.EnvVar{Name: EnvDashboardAddress, Value: job.Status.DashboardURL},
		corev1.EnvVar{Name: EnvSubmissionID, Value: job.Status.JobId},
	)
	if auth {
		raycluster.AddAuthEnv(c, raycluster.AuthSecretName(cluster, spec))
	}
	return nil
}

// SubmitterJob builds the K8sJobMode submitter: a batch Job named after the
// RayJob, running `ray job submit` in the head's image against the cluster's
// dashboard, with the cluster's token when its Ray requires one (auth). The
// caller sets the owner reference.
func SubmitterJob(job *rayv1.RayJob, cluster *rayv1.RayCluster, auth bool) (*batchv1.Job, error) {
	var tmpl corev1.PodTemplateSpec
	if job.Spec.SubmitterPodTemplate != nil {
		tmpl = *job.Spec.SubmitterPodTemplate.DeepCopy()
	} else {
		tmpl = corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers:    []corev1.Container{defaultSubmitterContainer(&cluster.Spec)},
			RestartPolicy: corev1.RestartPolicyNever,
		}}
	}
	if len(tmpl.Spec.Containers) == 0 {
		return nil, fmt.Errorf("spec.submitterPodTemplate has no container")
	}
	if err := configureSubmitter(&tmpl.Spec.Containers[0], job, rayv1.K8sJobMode, cluster.Name, &cluster.Spec, auth); err != nil {
		return nil, err
	}
	backoff := ptr.To[int32](defaultSubmitterBackoffLimit)
	if sc := job.Spec.SubmitterConfig; sc != nil && sc.BackoffLimit != nil {
		backoff = ptr.To(*sc.BackoffLimit)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: submitterJobName(job), Namespace: job.Namespace, Labels: originLabels(job)},
		Spec:       batchv1.JobSpec{BackoffLimit: backoff, Template: tmpl},
	}, nil
}

// sidecarSubmitter builds the SidecarMode container added to the head Pod of
// the cluster named cluster (made with spec), with its token when spec asks
// for token authentication.
func sidecarSubmitter(job *rayv1.RayJob, cluster string, spec *rayv1.RayClusterSpec) (corev1.Container, error) {
	c := defaultSubmitterContainer(spec)
	return c, configureSubmitter(&c, job, rayv1.SidecarMode, cluster, spec, raycluster.TokenAuth(spec, false))
}
