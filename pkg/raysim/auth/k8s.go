package auth

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Kubernetes-delegated token authentication (Ray 2.55 and later; KubeRay's
// authOptions.enableK8sTokenAuth): with RAY_AUTH_MODE=token and RAY_ENABLE_K8S_TOKEN_AUTH a node takes
// any bearer token the API server authenticates (a TokenReview) whose user may use verb ray:write on the
// node's RayCluster (a SubjectAccessReview naming RAY_CLUSTER_NAME in RAY_CLUSTER_NAMESPACE), asking
// with the pod's in-cluster credentials (KUBERNETES_SERVICE_HOST and _PORT, K8sSATokenPath and the CA
// beside it). A token allowed is remembered for K8sCacheTTL; one refused is asked about again each time.
// A review the API server does not answer within K8sReviewTimeout refuses the token, as one that fails.
// The node's own processes present the pod's service account token (RaySATokenPath, else
// K8sSATokenPath).
const (
	// K8sModeEnv turns Kubernetes-delegated token authentication on.
	K8sModeEnv = "RAY_ENABLE_K8S_TOKEN_AUTH"
	// RaySATokenPath is where KubeRay projects the pod's service account token for Ray's own processes.
	RaySATokenPath = "/var/run/secrets/ray.io/serviceaccount/token"
	// K8sSATokenPath is the pod's service account token every pod gets (its API credentials).
	K8sSATokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// K8sVerb is the verb the SubjectAccessReview asks about, on group ray.io, resource rayclusters.
	K8sVerb = "ray:write"
	// K8sCacheTTL is how long an allowed token is not asked about again.
	K8sCacheTTL = 5 * time.Minute
	// K8sReviewTimeout bounds a token's review (its TokenReview and SubjectAccessReview together).
	K8sReviewTimeout = 10 * time.Second
)

// K8sMode reports whether the environment getenv reads asks for Kubernetes-delegated token
// authentication (RAY_ENABLE_K8S_TOKEN_AUTH true or 1, as Ray reads a boolean setting).
func K8sMode(getenv func(string) string) bool {
	v, err := strconv.ParseBool(strings.TrimSpace(getenv(K8sModeEnv)))
	return err == nil && v
}

// K8sReviewer checks tokens with the API server, as Ray's nodes do with RAY_ENABLE_K8S_TOKEN_AUTH.
type K8sReviewer struct {
	client             kubernetes.Interface
	cluster, namespace string
	logf               func(format string, args ...any)
	now                func() time.Time
	timeout            time.Duration

	mu      sync.Mutex
	allowed map[string]time.Time // token → when it must be asked about again
}

// NewK8sReviewer reviews tokens for the RayCluster named by RAY_CLUSTER_NAME and RAY_CLUSTER_NAMESPACE in
// getenv, through the API server with cfg (nil: the pod's in-cluster credentials). Like Ray it does not
// fail to start without them: it logs why and then refuses every token.
func NewK8sReviewer(getenv func(string) string, cfg *rest.Config, logf func(format string, args ...any)) *K8sReviewer {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &K8sReviewer{cluster: getenv("RAY_CLUSTER_NAME"), namespace: getenv("RAY_CLUSTER_NAMESPACE"), logf: logf, now: time.Now, timeout: K8sReviewTimeout, allowed: map[string]time.Time{}}
	var err error
	if cfg == nil {
		if cfg, err = rest.InClusterConfig(); err != nil {
			logf("Kubernetes token authentication: no in-cluster credentials, every token is refused: %v", err)
			return r
		}
	}
	if r.client, err = kubernetes.NewForConfig(cfg); err != nil {
		logf("Kubernetes token authentication: %v; every token is refused", err)
	}
	return r
}

// Check is the reviewer as a Check.
func (r *K8sReviewer) Check() Check { return r.Allowed }

// Allowed reports whether the API server authenticates token and lets its user ray:write the cluster.
func (r *K8sReviewer) Allowed(ctx context.Context, token string) bool {
	if r.client == nil {
		return false
	}
	r.mu.Lock()
	until, ok := r.allowed[token]
	if ok && r.now().After(until) {
		delete(r.allowed, token)
		ok = false
	}
	r.mu.Unlock()
	if ok {
		return true
	}
	if !r.review(ctx, token) {
		return false
	}
	r.remember(token)
	return true
}

// remember notes token as allowed for K8sCacheTTL, and forgets the tokens whose time has passed (a
// token is otherwise only forgotten when it is presented again).
func (r *K8sReviewer) remember(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for t, until := range r.allowed {
		if now.After(until) {
			delete(r.allowed, t)
		}
	}
	r.allowed[token] = now.Add(K8sCacheTTL)
}

// review asks the API server about token, for at most r.timeout; any failure refuses it.
func (r *K8sReviewer) review(ctx context.Context, token string) bool {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		r.logf("Kubernetes TokenReview request failed: %v", err)
		return false
	}
	if !tr.Status.Authenticated {
		r.logf("Kubernetes token review failed: %s", tr.Status.Error)
		return false
	}
	if r.cluster == "" || r.namespace == "" {
		r.logf("RAY_CLUSTER_NAME or RAY_CLUSTER_NAMESPACE is not set: no token can be authorized")
		return false
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: u.Username, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "ray.io", Resource: "rayclusters",
				Namespace: r.namespace, Name: r.cluster, Verb: K8sVerb}}}, metav1.CreateOptions{})
	if err != nil {
		r.logf("Kubernetes SubjectAccessReview request failed: %v", err)
		return false
	}
	if !sar.Status.Allowed {
		r.logf("user %q may not %s RayCluster %s/%s", u.Username, K8sVerb, r.namespace, r.cluster)
		return false
	}
	return true
}
