package raycluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/pkg/rayports"
)

// Ray's token authentication, as KubeRay sets it up for spec.authOptions.mode "token" (Ray 2.52 and
// later): every Ray process, `ray` CLI call and dashboard request of the cluster carries one token, and
// Ray refuses gRPC calls and dashboard requests without it (its health endpoints excepted, so the
// probes need none). The token lives in a Secret named after the cluster (key AuthTokenKey), which the
// controller makes unless spec.authOptions.secretName names the user's own; the Ray containers, the
// workers' GCS wait, the autoscaler and a RayJob's submitter read it from RAY_AUTH_TOKEN.
//
// With spec.authOptions.enableK8sTokenAuth (Ray 2.55 and later) there is no Secret: Ray delegates the
// check to the API server. Its processes get RAY_ENABLE_K8S_TOKEN_AUTH=true and present the token of
// the pod's service account, projected (volume ray-token) at RayTokenMountPath; the GCS and the
// dashboard review each caller's bearer token (a TokenReview, then a SubjectAccessReview of verb
// ray:write on the RayCluster, named by RAY_CLUSTER_NAME and RAY_CLUSTER_NAMESPACE) with the pod's
// in-cluster credentials. So the pods' service account needs create on tokenreviews and
// subjectaccessreviews and ray:write on the cluster, as KubeRay's ray-cluster.kubernetes.auth.yaml grants.
const (
	// AuthTokenKey is the Secret's data key that holds the token.
	AuthTokenKey = "auth_token"
	// EnvAuthMode and EnvAuthToken are what Ray reads: mode "token", and the token.
	EnvAuthMode  = "RAY_AUTH_MODE"
	EnvAuthToken = "RAY_AUTH_TOKEN"
	// minAuthRayVersion is the first Ray with token authentication.
	minAuthRayVersion = "2.52.0"
	// minK8sAuthRayVersion is the first Ray that can delegate token authentication to Kubernetes
	// (authOptions.enableK8sTokenAuth).
	minK8sAuthRayVersion = "2.55.0"
	// EnvK8sTokenAuth turns on Ray's Kubernetes-delegated token authentication.
	EnvK8sTokenAuth = "RAY_ENABLE_K8S_TOKEN_AUTH"
	// RayTokenVolume is the projected service account token volume Ray's processes present their token
	// from, mounted at RayTokenMountPath (KubeRay's names).
	RayTokenVolume = "ray-token"
	// RayTokenMountPath is where a Ray container with Kubernetes-delegated token authentication gets
	// RayTokenVolume (read-only): Ray reads its token from the file "token" there.
	RayTokenMountPath = "/var/run/secrets/ray.io/serviceaccount"
)

// TokenAuth reports whether the cluster's Ray requires a token: spec.authOptions.mode "token", or, on a
// node whose pods share the host's network (hostPorts; there every local user reaches every Ray port),
// anything but an explicit "disabled".
func TokenAuth(spec *rayv1.RayClusterSpec, hostPorts bool) bool {
	if spec == nil {
		return false
	}
	if ao := spec.AuthOptions; ao != nil && ao.Mode != "" {
		return ao.Mode == rayv1.AuthModeToken
	}
	return hostPorts
}

// ExistingHeadService returns c's head Service as r reads it, nil while there is none.
func ExistingHeadService(ctx context.Context, r client.Reader, c *rayv1.RayCluster) (*corev1.Service, error) {
	var svc corev1.Service
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: rayparams.HeadServiceName(c)}, &svc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &svc, nil
}

// RecordsHostPorts reports whether a head Service records its head's block of ports: the cluster's
// Pods share the host's network, each on a block of its own.
func RecordsHostPorts(svc *corev1.Service) bool {
	if svc == nil {
		return false
	}
	_, ok := rayports.FromAnnotations(svc.Annotations)
	return ok
}

// OnHostPorts reports whether the cluster's Pods share the host's network, each on a block of ports
// (RecordsHostPorts of its head Service).
func OnHostPorts(ctx context.Context, r client.Reader, c *rayv1.RayCluster) (bool, error) {
	svc, err := ExistingHeadService(ctx, r, c)
	return RecordsHostPorts(svc), err
}

// ClusterAuth reports whether c's Ray requires a token (TokenAuth, OnHostPorts).
func ClusterAuth(ctx context.Context, r client.Reader, c *rayv1.RayCluster) (bool, error) {
	hostPorts, err := OnHostPorts(ctx, r, c)
	if err != nil {
		return false, err
	}
	return TokenAuth(&c.Spec, hostPorts), nil
}

// AuthSecretName is the Secret holding the token of the cluster named name: spec.authOptions.secretName,
// else the cluster's name (shortened as KubeRay shortens names).
func AuthSecretName(name string, spec *rayv1.RayClusterSpec) string {
	if ao := spec.AuthOptions; ao != nil && ptr.Deref(ao.SecretName, "") != "" {
		return *ao.SecretName
	}
	return checkName(name)
}

// AddAuthEnv gives ctr RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from the Secret secret, each unless ctr
// sets it already.
func AddAuthEnv(ctr *corev1.Container, secret string) {
	if !hasEnv(ctr.Env, EnvAuthMode) {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: EnvAuthMode, Value: string(rayv1.AuthModeToken)})
	}
	if !hasEnv(ctr.Env, EnvAuthToken) {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: EnvAuthToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: AuthTokenKey}}})
	}
}

// addK8sAuth gives ctr what Ray reads for Kubernetes-delegated token authentication (RAY_AUTH_MODE
// token, RAY_ENABLE_K8S_TOKEN_AUTH true, the ray-token volume mounted read-only), each unless ctr has it,
// and pod the ray-token volume: the pod's service account token for the API server's audience.
func addK8sAuth(pod *corev1.PodSpec, ctr *corev1.Container) {
	for _, e := range []corev1.EnvVar{{Name: EnvAuthMode, Value: string(rayv1.AuthModeToken)}, {Name: EnvK8sTokenAuth, Value: "true"}} {
		if !hasEnv(ctr.Env, e.Name) {
			ctr.Env = append(ctr.Env, e)
		}
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == RayTokenVolume }) {
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: RayTokenVolume, MountPath: RayTokenMountPath, ReadOnly: true})
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == RayTokenVolume }) {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: RayTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	}
}

// HeadServiceAccount is the service account c's head runs as ("default" when its template names none).
func HeadServiceAccount(c *rayv1.RayCluster) string {
	if sa := c.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	return "default"
}

// UserToken returns a token c's dashboard accepts ("" when c's Ray requires none), as a user gets it:
// the Secret's token (ClusterToken), or, where c delegates authentication to Kubernetes
// (enableK8sTokenAuth), a new token of service account account in c's namespace (HeadServiceAccount when
// account is empty: Ray's own processes need ray:write on c, so the head's account has it wherever the
// cluster works), issued through the API server (TokenRequest, the API server's audience, an hour).
func UserToken(ctx context.Context, cl client.Client, c *rayv1.RayCluster, account string) (string, error) {
	if !K8sTokenAuth(&c.Spec) {
		return ClusterToken(ctx, cl, cl, c)
	}
	if account == "" {
		account = HeadServiceAccount(c)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: account}}
	tr := &authenticationv1.TokenRequest{}
	if err := cl.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("issuing a token of service account %s/%s for RayCluster %s (authOptions.enableK8sTokenAuth): %w", c.Namespace, account, c.Name, err)
	}
	return tr.Status.Token, nil
}

// ClusterToken returns the token c's dashboard requires ("" when c's Ray requires none), reading c's
// head Service through r and its Secret through secrets. Controllers read Secrets uncached (the
// manager's API reader): no informer holds every Secret of the cluster, and RBAC grants them get, not
// list. A cluster that delegates authentication to Kubernetes has no such token (see UserToken).
func ClusterToken(ctx context.Context, r, secrets client.Reader, c *rayv1.RayCluster) (string, error) {
	on, err := ClusterAuth(ctx, r, c)
	if err != nil || !on {
		return "", err
	}
	if K8sTokenAuth(&c.Spec) {
		return "", fmt.Errorf("RayCluster %s/%s delegates token authentication to Kubernetes (authOptions.enableK8sTokenAuth): it takes service account tokens, not a Secret's", c.Namespace, c.Name)
	}
	var s corev1.Secret
	secret := AuthSecretName(c.Name, &c.Spec)
	if err := secrets.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: secret}, &s); err != nil {
		return "", fmt.Errorf("reading the token of RayCluster %s/%s (Secret %s): %w", c.Namespace, c.Name, secret, err)
	}
	token := string(s.Data[AuthTokenKey])
	if token == "" {
		return "", fmt.Errorf("secret %s/%s has no %s for RayCluster %s's token", c.Namespace, secret, AuthTokenKey, c.Name)
	}
	return token, nil
}

// errK8sAuthUnplaced is why a cluster with Kubernetes-delegated token authentication gets no pods on a
// node whose pods do not get their volumes at their mountPaths: Ray reads its service account token and
// the cluster's CA at fixed paths, so it would authenticate nothing (its processes could not even start).
var errK8sAuthUnplaced = errors.New("authOptions.enableK8sTokenAuth: Ray reads the service account token and CA at " +
	"/var/run/secrets/kubernetes.io/serviceaccount and " + RayTokenMountPath + ", and this node's pods cannot have files there " +
	"(the host-process runtime gives pods mount namespaces only as root on Linux); use authOptions.mode token without it")

// validateAuth rejects what KubeRay v1.7 rejects of spec.authOptions.
func validateAuth(spec *rayv1.RayClusterSpec) error {
	ao := spec.AuthOptions
	if ao == nil {
		return nil
	}
	k8s := ptr.Deref(ao.EnableK8sTokenAuth, false)
	if ao.Mode != rayv1.AuthModeToken {
		if k8s {
			return fmt.Errorf("authOptions.enableK8sTokenAuth needs authOptions.mode token")
		}
		return nil
	}
	least := minAuthRayVersion
	if k8s {
		if ptr.Deref(ao.SecretName, "") != "" {
			return fmt.Errorf("authOptions.enableK8sTokenAuth and authOptions.secretName cannot both be set")
		}
		least = minK8sAuthRayVersion
	}
	if spec.RayVersion == "" {
		return fmt.Errorf("authOptions.mode token needs spec.rayVersion %s or later", least)
	}
	v, err := version.ParseGeneric(spec.RayVersion)
	if err != nil {
		return fmt.Errorf("authOptions.mode token: spec.rayVersion %q: %v", spec.RayVersion, err)
	}
	if v.LessThan(version.MustParseGeneric(least)) {
		what := "authOptions.mode token"
		if k8s {
			what = "authOptions.enableK8sTokenAuth"
		}
		return fmt.Errorf("%s needs Ray %s or later; spec.rayVersion is %s", what, least, spec.RayVersion)
	}
	return nil
}

// K8sTokenAuth reports whether spec asks for Kubernetes-delegated token authentication, which KubeRay
// v1.7 refuses in a RayJob's or RayService's cluster.
func K8sTokenAuth(spec *rayv1.RayClusterSpec) bool {
	return spec != nil && spec.AuthOptions != nil && ptr.Deref(spec.AuthOptions.EnableK8sTokenAuth, false)
}

// authSecret is the Secret the controller makes for c's token: a random 32 bytes in base64, labelled
// with the cluster and owned by it.
func authSecret(c *rayv1.RayCluster) (*corev1.Secret, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: AuthSecretName(c.Name, &c.Spec), Namespace: c.Namespace,
			Labels: map[string]string{rayparams.LabelCluster: c.Name}, OwnerReferences: []metav1.OwnerReference{ownerRef(c)}},
		StringData: map[string]string{AuthTokenKey: base64.StdEncoding.EncodeToString(b)},
	}, nil
}

// reconcileAuthSecret makes c's token Secret when c asks for token authentication with a token of the
// controller's making (no authOptions.secretName), before any Pod that reads it.
func (r *reconciler) reconcileAuthSecret(ctx context.Context, c *rayv1.RayCluster) error {
	if !TokenAuth(&c.Spec, r.ports != nil) || K8sTokenAuth(&c.Spec) || (c.Spec.AuthOptions != nil && ptr.Deref(c.Spec.AuthOptions.SecretName, "") != "") {
		return nil
	}
	name := AuthSecretName(c.Name, &c.Spec)
	err := r.secrets.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &corev1.Secret{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	s, err := authSecret(c)
	if err != nil {
		return err
	}
	if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.hooks.Wrote(ctx, s, chain.Create)
	return nil
}
