package raycluster

import (
	"context"
	"fmt"
	"slices"
	"unicode"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The in-tree autoscaler, as KubeRay v1.5/v1.6 sets it up when spec.enableInTreeAutoscaling is true: a
// sidecar container in the head Pod running `ray kuberay-autoscaler`, the head's `ray start` without
// its own monitor, Ray's logs on a volume both containers share, and a ServiceAccount, Role and
// RoleBinding (owned by the RayCluster) that let the sidecar read the cluster's Pods and patch the
// RayCluster's replicas and workersToDelete.
const (
	// AutoscalerContainerName is the sidecar's container name.
	AutoscalerContainerName = "autoscaler"
	// EnvAutoscalerV2 turns on Ray's autoscaler v2 in the head's Ray container (autoscalerOptions.version: v2).
	EnvAutoscalerV2 = "RAY_enable_autoscaler_v2"

	rayLogsVolume = "ray-logs"
	rayLogsPath   = "/tmp/ray"
)

// Event reasons of the autoscaler's ServiceAccount, Role and RoleBinding, as KubeRay records them.
const (
	EventCreatedServiceAccount     = "CreatedServiceAccount"
	EventFailedToCreateSA          = "FailedToCreateServiceAccount"
	EventAutoscalerSANotFound      = "AutoscalerServiceAccountNotFound"
	EventCreatedRole               = "CreatedRole"
	EventFailedToCreateRole        = "FailedToCreateRole"
	EventCreatedRoleBinding        = "CreatedRoleBinding"
	EventFailedToCreateRoleBinding = "FailedToCreateRoleBinding"
)

// AutoscalingEnabled reports whether c asks for the in-tree autoscaler.
func AutoscalingEnabled(c *rayv1.RayCluster) bool {
	return c.Spec.EnableInTreeAutoscaling != nil && *c.Spec.EnableInTreeAutoscaling
}

// autoscalerV2 reports whether c asks for Ray's autoscaler v2 (autoscalerOptions.version: v2).
func autoscalerV2(c *rayv1.RayCluster) bool {
	o := c.Spec.AutoscalerOptions
	return AutoscalingEnabled(c) && o != nil && o.Version != nil && *o.Version == rayv1.AutoscalerVersionV2
}

// AutoscalerServiceAccountName is the head Pod's ServiceAccount when autoscaling: the head template's,
// else one named after the cluster (clipped as KubeRay clips it).
func AutoscalerServiceAccountName(c *rayv1.RayCluster) string {
	if n := c.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName; n != "" {
		return checkName(n)
	}
	return checkName(c.Name)
}

// checkName keeps a name within 50 characters (dropping the front) and makes it start with a letter,
// as KubeRay does for the autoscaler's ServiceAccount, Role and RoleBinding.
func checkName(s string) string {
	if len(s) > 50 {
		s = s[len(s)-50:]
	}
	if s != "" && (unicode.IsDigit(rune(s[0])) || unicode.IsPunct(rune(s[0]))) {
		s = "r" + s[1:]
	}
	return s
}

// addAutoscaler turns the head's template and `ray start` params into the autoscaling head's: no
// monitor, the autoscaler's ServiceAccount, and the sidecar appended after the Ray container.
func addAutoscaler(c *rayv1.RayCluster, tmpl *corev1.PodTemplateSpec, params map[string]string) {
	params["no-monitor"] = "true"
	tmpl.Spec.ServiceAccountName = AutoscalerServiceAccountName(c)
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, AutoscalerContainer(c))
	if autoscalerV2(c) {
		ray := &tmpl.Spec.Containers[0]
		ray.Env = append(ray.Env, corev1.EnvVar{Name: EnvAutoscalerV2, Value: "true"})
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
}

// AutoscalerContainer is the sidecar KubeRay injects into c's head Pod: the head's image unless
// autoscalerOptions.image says otherwise, `ray kuberay-autoscaler` for this cluster, 500m CPU and
// 512Mi, with autoscalerOptions' resources, image pull policy, securityContext, env, envFrom and
// volumeMounts applied.
func AutoscalerContainer(c *rayv1.RayCluster) corev1.Container {
	fixed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	ctr := corev1.Container{
		Name:            AutoscalerContainerName,
		Image:           c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{
			fieldEnv("RAY_CLUSTER_NAME", fmt.Sprintf("metadata.labels['%s']", rayparams.LabelCluster)),
			fieldEnv("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
			fieldEnv("RAY_HEAD_POD_NAME", "metadata.name"),
			{Name: "KUBERAY_CRD_VER", Value: "v1"},
		},
		Command:   shellCommand(),
		Args:      []string{"ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"},
		Resources: corev1.ResourceRequirements{Limits: fixed, Requests: fixed.DeepCopy()},
	}
	o := c.Spec.AutoscalerOptions
	if o == nil {
		return ctr
	}
	if o.Resources != nil {
		ctr.Resources = *o.Resources.DeepCopy()
	}
	if o.Image != nil {
		ctr.Image = *o.Image
	}
	if o.ImagePullPolicy != nil {
		ctr.ImagePullPolicy = *o.ImagePullPolicy
	}
	ctr.Env = append(ctr.Env, o.Env...)
	ctr.EnvFrom = append(ctr.EnvFrom, o.EnvFrom...)
	ctr.VolumeMounts = append(ctr.VolumeMounts, o.VolumeMounts...)
	if o.SecurityContext != nil {
		ctr.SecurityContext = o.SecurityContext.DeepCopy()
	}
	return ctr
}

// addLogVolume shares Ray's log directory between the head's Ray container and the autoscaler (Ray's
// autoscaler writes event logs the head's dashboard reads).
func addLogVolume(pod *corev1.Pod) {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == AutoscalerContainerName })
	if i < 0 {
		return
	}
	addEmptyDir(pod, &pod.Spec.Containers[0], rayLogsVolume, rayLogsPath, corev1.EmptyDirVolumeSource{})
	addEmptyDir(pod, &pod.Spec.Containers[i], rayLogsVolume, rayLogsPath, corev1.EmptyDirVolumeSource{})
}

// addEmptyDir mounts an emptyDir volume name at path in ctr, unless ctr mounts something there
// already; the volume is added to pod once.
func addEmptyDir(pod *corev1.Pod, ctr *corev1.Container, name, path string, src corev1.EmptyDirVolumeSource) {
	if slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path }) {
		return
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &src}})
	}
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
}

// AutoscalerRole is the Role KubeRay grants the autoscaler: read and patch the cluster's Pods (and
// resize them), get and patch RayClusters.
func AutoscalerRole(c *rayv1.RayCluster) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: autoscalerObjectMeta(c, checkName(c.Name)),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/resize"}, Verbs: []string{"patch"}},
			{APIGroups: []string{rayv1.GroupVersion.Group}, Resources: []string{"rayclusters"}, Verbs: []string{"get", "patch"}},
		},
	}
}

// AutoscalerRoleBinding binds AutoscalerRole to the head's ServiceAccount.
func AutoscalerRoleBinding(c *rayv1.RayCluster) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: autoscalerObjectMeta(c, checkName(c.Name)),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AutoscalerServiceAccountName(c), Namespace: c.Namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: checkName(c.Name)},
	}
}

func autoscalerObjectMeta(c *rayv1.RayCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: c.Namespace,
		Labels:          map[string]string{rayparams.LabelCluster: c.Name, rayparams.LabelAppName: rayparams.AppName, rayparams.LabelCreatedBy: rayparams.CreatedBy},
		OwnerReferences: []metav1.OwnerReference{ownerRef(c)},
	}
}

// reconcileAutoscalerRBAC creates what the autoscaler sidecar needs, as KubeRay does, before the head
// Pod: its ServiceAccount (unless the head template names one, which the user must then create), its
// Role and its RoleBinding. Existing objects are left as they are.
func (r *reconciler) reconcileAutoscalerRBAC(ctx context.Context, c *rayv1.RayCluster) error {
	if !AutoscalingEnabled(c) {
		return nil
	}
	saName := AutoscalerServiceAccountName(c)
	sa := &corev1.ServiceAccount{ObjectMeta: autoscalerObjectMeta(c, saName)}
	if c.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName == saName {
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: saName}, &corev1.ServiceAccount{}); err != nil {
			if apierrors.IsNotFound(err) {
				r.recorder.Eventf(c, corev1.EventTypeWarning, EventAutoscalerSANotFound,
					"Failed to reconcile RayCluster %s/%s. The head Pod names ServiceAccount %s, which is not found: create it (rayctl, like KubeRay, creates one only when the head names none)",
					c.Namespace, c.Name, saName)
			}
			return err
		}
		sa = nil
	}
	type want struct {
		obj              client.Object
		kind, ok, failed string
	}
	var wants []want
	if sa != nil {
		wants = append(wants, want{sa, "service account", EventCreatedServiceAccount, EventFailedToCreateSA})
	}
	wants = append(wants,
		want{AutoscalerRole(c), "role", EventCreatedRole, EventFailedToCreateRole},
		want{AutoscalerRoleBinding(c), "role binding", EventCreatedRoleBinding, EventFailedToCreateRoleBinding})
	for _, w := range wants {
		existing := w.obj.DeepCopyObject().(client.Object)
		err := r.client.Get(ctx, client.ObjectKeyFromObject(w.obj), existing)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := r.client.Create(ctx, w.obj); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // the cache has not caught up with an earlier create
			}
			r.recorder.Eventf(c, corev1.EventTypeWarning, w.failed, "Failed creating %s %s/%s, %v", w.kind, c.Namespace, w.obj.GetName(), err)
			return err
		}
		r.recorder.Eventf(c, corev1.EventTypeNormal, w.ok, "Created %s %s/%s", w.kind, c.Namespace, w.obj.GetName())
	}
	return nil
}
