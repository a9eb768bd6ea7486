package rayjob

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// errSelectedClusterMissing: the RayCluster named by spec.clusterSelector does
// not exist; the user has to create it (an event says so).
var errSelectedClusterMissing = errors.New("the RayCluster named in clusterSelector does not exist")

// lastAppliedAnnotation is kubectl's record of an applied manifest; it
// describes the RayJob, so it is not copied onto the RayCluster.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func clusterKey(job *rayv1.RayJob) types.NamespacedName {
	return types.NamespacedName{Namespace: job.Namespace, Name: job.Status.RayClusterName}
}

// getOrCreateCluster returns the RayCluster named in status.rayClusterName,
// creating it from spec.rayClusterSpec unless the job selects an existing one.
// A selected cluster the job cannot use is a *ValidationError.
func (p *pass) getOrCreateCluster(ctx context.Context) (*rayv1.RayCluster, error) {
	key := clusterKey(p.job)
	cluster := &rayv1.RayCluster{}
	err := p.r.client.Get(ctx, key, cluster)
	if err == nil {
		if usesClusterSelector(p.job) && raycluster.K8sTokenAuth(&cluster.Spec) {
			// As for a RayJob's own rayClusterSpec (validateSpec): no token to submit with.
			return nil, invalid(EventInvalidSpec, "The RayJob spec is invalid: clusterSelector: RayCluster %s/%s has "+
				"authOptions.enableK8sTokenAuth; Kubernetes-delegated token authentication is not supported for a RayJob (as in KubeRay v1.7)",
				key.Namespace, key.Name)
		}
		return cluster, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if usesClusterSelector(p.job) {
		p.event(corev1.EventTypeWarning, EventClusterNotFound, "RayCluster %s/%s set in the clusterSelector is not found. It must be created manually", key.Namespace, key.Name)
		return nil, errSelectedClusterMissing
	}
	cluster, err = p.newCluster(key.Name)
	if err != nil {
		return nil, err
	}
	if err := p.createCluster(ctx, cluster); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("RayCluster %s exists but is not in the cache yet: %w", key, err)
		}
		p.event(corev1.EventTypeWarning, EventFailedCreateCluster, "Failed to create RayCluster %s/%s: %v", key.Namespace, key.Name, err)
		return nil, err
	}
	p.log.Info("created the RayCluster", "rayCluster", key.Name)
	p.event(corev1.EventTypeNormal, EventCreatedCluster, "Created RayCluster %s/%s", key.Namespace, key.Name)
	return cluster, nil
}

// createCluster creates c, with the fields of spec.rayClusterSpec that rayctl's Go types (KubeRay v1.6.2's)
// lack — KubeRay v1.7's networkPolicy — copied from the RayJob as stored (read unstructured), as KubeRay
// gives its cluster the whole rayClusterSpec. On success c holds what the API server returned.
func (p *pass) createCluster(ctx context.Context, c *rayv1.RayCluster) error {
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayJob"))
	if err := p.r.client.Get(ctx, client.ObjectKeyFromObject(p.job), raw); err != nil {
		return err
	}
	if raw.GetUID() != p.job.UID || raw.GetGeneration() != p.job.Generation {
		// Not the generation this pass read; the next pass retries with the new one.
		return apierrors.NewConflict(rayv1.Resource("rayjobs"), p.job.Name, errors.New("the RayJob changed while its RayCluster was being made"))
	}
	stored, _, _ := unstructured.NestedMap(raw.Object, "spec", "rayClusterSpec")
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return err
	}
	spec, _ := obj["spec"].(map[string]any)
	later := false
	for k, v := range stored {
		if !knownClusterSpecField(k) {
			spec[k], later = v, true
		}
	}
	if !later {
		return p.r.client.Create(ctx, c)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayCluster"))
	delete(u.Object, "status")
	if err := p.r.client.Create(ctx, u); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c)
}

// knownClusterSpecField says whether rayctl's RayClusterSpec type has a field of that JSON name: such a
// field is the typed spec's (which the RayJob controller may have changed), even when empty there.
func knownClusterSpecField(name string) bool {
	_, ok := clusterSpecFields[name]
	return ok
}

// clusterSpecFields are the JSON names of rayctl's RayClusterSpec's fields.
var clusterSpecFields = func() map[string]struct{} {
	out := map[string]struct{}{}
	t := reflect.TypeOf(rayv1.RayClusterSpec{})
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = struct{}{}
	}
	return out
}()

// newCluster builds the RayJob's own RayCluster: its spec.rayClusterSpec, its
// labels and annotations, a controller reference, and in SidecarMode the
// submitter container in the head Pod.
func (p *pass) newCluster(name string) (*rayv1.RayCluster, error) {
	job := p.job
	labels := map[string]string{}
	for k, v := range job.Labels {
		labels[k] = v
	}
	labels[rayparams.LabelOriginName] = job.Name
	labels[rayparams.LabelOriginatedCRD] = rayparams.OriginRayJob
	// KubeRay v1.7 records the submission mode on the cluster (its NetworkPolicies let a K8sJobMode
	// job's submitter reach the dashboard).
	labels[rayparams.LabelSubmissionMode] = string(job.Spec.SubmissionMode)
	var annotations map[string]string
	for k, v := range job.Annotations {
		if k == lastAppliedAnnotation {
			continue
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = v
	}
	cluster := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: labels, Annotations: annotations},
		Spec:       *job.Spec.RayClusterSpec.DeepCopy(),
	}
	if err := controllerutil.SetControllerReference(job, cluster, p.r.client.Scheme()); err != nil {
		return nil, err
	}
	if submissionMode(job) == rayv1.SidecarMode {
		sidecar, err := sidecarSubmitter(job, cluster.Name, &cluster.Spec)
		if err != nil {
			return nil, err
		}
		head := &cluster.Spec.HeadGroupSpec.Template.Spec
		head.Containers = append(head.Containers, sidecar)
		// The sidecar shares the dashboard's network namespace; restarting it would only resubmit.
		head.RestartPolicy = corev1.RestartPolicyNever
	}
	return cluster, nil
}

// deleteCluster deletes the RayJob's RayCluster and reports whether it is gone.
// A cluster selected with clusterSelector belongs to the user and counts as gone.
func (p *pass) deleteCluster(ctx context.Context) (bool, error) {
	if usesClusterSelector(p.job) || p.status().RayClusterName == "" {
		return true, nil
	}
	cluster := &rayv1.RayCluster{}
	if err := p.r.client.Get(ctx, clusterKey(p.job), cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if err := p.r.client.Delete(ctx, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		p.event(corev1.EventTypeWarning, EventFailedDeleteCluster, "Failed to delete cluster %s/%s: %v", cluster.Namespace, cluster.Name, err)
		return false, err
	}
	p.log.Info("deleted the RayCluster", "rayCluster", cluster.Name)
	p.event(corev1.EventTypeNormal, EventDeletedCluster, "Deleted cluster %s/%s", cluster.Namespace, cluster.Name)
	return false, nil
}

// statusDashboardURL is the dashboard address shown in status.dashboardURL and
// used by the K8sJobMode submitter: host:port of the cluster's head Service,
// as KubeRay writes it. Where pods share the host's network (the Service
// records the head's block of ports, rayports), no pod resolves the Service's
// name: it is the host's loopback and the head's own dashboard port, which
// pods and the user's shell on the host reach alike.
func (p *pass) statusDashboardURL(ctx context.Context, cluster *rayv1.RayCluster) (string, error) {
	name := rayparams.CurrentHeadServiceName(cluster)
	port := rayparams.DashboardPort(&cluster.Spec)
	svc, err := raycluster.ExistingHeadService(ctx, p.r.client, cluster)
	if err != nil {
		return "", err
	}
	if svc != nil {
		for _, sp := range svc.Spec.Ports {
			if sp.Name != rayparams.DashboardPortName {
				continue
			}
			port = sp.Port
			if raycluster.RecordsHostPorts(svc) && sp.TargetPort.IntVal > 0 {
				return fmt.Sprintf("127.0.0.1:%d", sp.TargetPort.IntVal), nil
			}
		}
	}
	return fmt.Sprintf("%s.%s.svc.%s:%d", name, cluster.Namespace, p.r.opts.ClusterDomain, port), nil
}

// jobsAPI returns a client for the cluster's dashboard, and ctx carrying the
// cluster's token for its calls when its Ray requires one.
func (p *pass) jobsAPI(ctx context.Context, cluster *rayv1.RayCluster) (context.Context, JobsAPI, error) {
	url, err := p.r.opts.Resolver(ctx, cluster)
	if err != nil {
		return ctx, nil, err
	}
	token, err := raycluster.ClusterToken(ctx, p.r.client, p.r.opts.Secrets, cluster)
	if err != nil {
		return ctx, nil, err
	}
	return raydashboard.WithAuthToken(ctx, token), p.r.opts.NewJobsAPI(url), nil
}

// reconcileHeadService keeps the RayJob's own head Service (<rayjob>-head-svc)
// pointing at the head of its current RayCluster, so the job's address stays
// the same across retries.
func (p *pass) reconcileHeadService(ctx context.Context, cluster *rayv1.RayCluster) error {
	if usesClusterSelector(p.job) {
		return nil
	}
	want := p.headService(cluster)
	// Where pods share the host's network, the cluster's head Service points its ports at the head's
	// own (rayports); this one points at the same.
	svc, err := raycluster.ExistingHeadService(ctx, p.r.client, cluster)
	if err != nil {
		return err
	}
	onHostPorts := raycluster.RecordsHostPorts(svc)
	if onHostPorts {
		want.Spec.Ports = svc.DeepCopy().Spec.Ports
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			want.Spec.ClusterIP = "" // an IP of its own, as the cluster's (raycluster's placeServicePorts)
		}
	}
	have := &corev1.Service{}
	err = p.r.client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		if err := controllerutil.SetControllerReference(p.job, want, p.r.client.Scheme()); err != nil {
			return err
		}
		if err := p.r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			p.event(corev1.EventTypeWarning, EventFailedService, "Failed to create the service %s/%s, %v", want.Namespace, want.Name, err)
			return err
		}
		p.event(corev1.EventTypeNormal, EventCreatedService, "Created the service %s/%s", want.Namespace, want.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if have.Spec.Selector[rayparams.LabelCluster] == cluster.Name && (!onHostPorts || sameTargets(have.Spec.Ports, want.Spec.Ports)) {
		return nil
	}
	want.Spec.ClusterIP, want.Spec.ClusterIPs = have.Spec.ClusterIP, have.Spec.ClusterIPs
	have.Spec = want.Spec
	if err := p.r.client.Update(ctx, have); err != nil {
		return err
	}
	p.event(corev1.EventTypeNormal, EventUpdatedService, "Updated the service %s/%s", have.Namespace, have.Name)
	return nil
}

// headService builds <rayjob>-head-svc for the cluster's head Pod: the head
// container's ports (KubeRay's defaults when it names none), headless unless
// the cluster asks for another Service type.
func (p *pass) headService(cluster *rayv1.RayCluster) *corev1.Service {
	job := p.job
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      rayparams.OwnedHeadServiceName(job.Name),
			Namespace: job.Namespace,
			Labels: map[string]string{
				rayparams.LabelOriginName:    job.Name,
				rayparams.LabelOriginatedCRD: rayparams.OriginRayJob,
				rayparams.LabelNodeType:      string(rayv1.HeadNode),
			},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{rayparams.LabelCluster: cluster.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)},
			Ports:    headServicePorts(&cluster.Spec),
			Type:     cluster.Spec.HeadGroupSpec.ServiceType,
		},
	}
	if svc.Spec.Type == "" || svc.Spec.Type == corev1.ServiceTypeClusterIP {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.PublishNotReadyAddresses = true
	}
	return svc
}

// sameTargets reports whether two lists of Service ports send the same ports to the same target ports.
func sameTargets(a, b []corev1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Port != b[i].Port || a[i].TargetPort != b[i].TargetPort {
			return false
		}
	}
	return true
}

func headServicePorts(spec *rayv1.RayClusterSpec) []corev1.ServicePort {
	ports := rayparams.HeadServicePorts(spec)
	out := make([]corev1.ServicePort, 0, len(ports))
	for name, port := range ports {
		out = append(out, corev1.ServicePort{Name: name, Port: port, AppProtocol: ptr.To("tcp")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// createSubmitterIfMissing creates the K8sJobMode submitter Job once.
func (p *pass) createSubmitterIfMissing(ctx context.Context, cluster *rayv1.RayCluster) error {
	existing := &batchv1.Job{}
	key := types.NamespacedName{Namespace: p.job.Namespace, Name: submitterJobName(p.job)}
	err := p.r.client.Get(ctx, key, existing)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	auth, err := raycluster.ClusterAuth(ctx, p.r.client, cluster)
	if err != nil {
		return err
	}
	job, err := SubmitterJob(p.job, cluster, auth)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(p.job, job, p.r.client.Scheme()); err != nil {
		return err
	}
	if err := p.r.client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		p.event(corev1.EventTypeWarning, EventFailedCreateSubmitter, "Failed to create new Kubernetes Job %s/%s: %v", job.Namespace, job.Name, err)
		return err
	}
	p.log.Info("created the submitter Job", "job", job.Name)
	p.event(corev1.EventTypeNormal, EventCreatedSubmitter, "Created Kubernetes Job %s/%s", job.Namespace, job.Name)
	return nil
}

// deleteSubmitter deletes the K8sJobMode submitter Job (and, through the
// garbage collector, its Pods) and reports whether it is gone.
func (p *pass) deleteSubmitter(ctx context.Context) (bool, error) {
	if submissionMode(p.job) != rayv1.K8sJobMode {
		return true, nil
	}
	job := &batchv1.Job{}
	if err := p.r.client.Get(ctx, types.NamespacedName{Namespace: p.job.Namespace, Name: submitterJobName(p.job)}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if !job.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if err := p.r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		p.event(corev1.EventTypeWarning, EventFailedDeleteSubmitter, "Failed to delete submitter K8s Job %s/%s: %v", job.Namespace, job.Name, err)
		return false, err
	}
	p.event(corev1.EventTypeNormal, EventDeletedSubmitter, "Deleted submitter K8s Job %s/%s", job.Namespace, job.Name)
	return false, nil
}

// checkSubmitter looks at the submitter (the batch Job, or the head Pod's
// sidecar). failed says it failed for good and status now says Failed;
// finishedAt is when it ended, nil while it runs.
func (p *pass) checkSubmitter(ctx context.Context, cluster *rayv1.RayCluster) (failed bool, finishedAt *time.Time, err error) {
	st := p.status()
	failWith := func(detail string) {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
		if st.JobStatus == rayv1.JobStatusFailed {
			// The submitter follows the job's logs; the job's own failure is the story.
			st.Reason = rayv1.AppFailed
			return
		}
		st.Reason = rayv1.SubmissionFailed
		st.Message = detail
	}
	switch submissionMode(p.job) {
	case rayv1.K8sJobMode:
		job := &batchv1.Job{}
		if err := p.r.client.Get(ctx, types.NamespacedName{Namespace: p.job.Namespace, Name: submitterJobName(p.job)}, job); err != nil {
			return false, nil, fmt.Errorf("reading the submitter Job: %w", err)
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue || (c.Type != batchv1.JobComplete && c.Type != batchv1.JobFailed) {
				continue
			}
			if !c.LastTransitionTime.IsZero() {
				finishedAt = &c.LastTransitionTime.Time
			}
			if c.Type == batchv1.JobFailed {
				failWith(fmt.Sprintf("Job submission has failed. Reason: %s. Message: %s", c.Reason, c.Message))
				return true, finishedAt, nil
			}
		}
		return false, finishedAt, nil
	case rayv1.SidecarMode:
		pods := &corev1.PodList{}
		if err := p.r.client.List(ctx, pods, client.InNamespace(cluster.Namespace),
			client.MatchingLabels{rayparams.LabelCluster: cluster.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)}); err != nil {
			return false, nil, err
		}
		if len(pods.Items) == 0 {
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
			st.Reason = rayv1.AppFailed
			st.Message = "Ray head pod not found."
			return true, nil, nil
		}
		for _, cs := range pods.Items[0].Status.ContainerStatuses {
			if cs.Name != rayparams.SubmitterContainerName || cs.State.Terminated == nil {
				continue
			}
			t := cs.State.Terminated
			finishedAt = &t.FinishedAt.Time
			if t.ExitCode != 0 {
				failWith(fmt.Sprintf("Ray head pod container %s terminated with exit code %d: %s", cs.Name, t.ExitCode, t.Reason))
				return true, finishedAt, nil
			}
		}
		return false, finishedAt, nil
	}
	return false, nil, nil
}
