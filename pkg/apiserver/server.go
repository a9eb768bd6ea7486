// Package apiserver is rayctl's Kubernetes API server: one k8s.io/apiserver GenericAPIServer, built as the
// apiextensions-apiserver so that CustomResourceDefinitions and the built-in groups share one discovery
// document and one OpenAPI spec, stored in etcd, served over TLS with client-certificate identities.
// Its parts live below it (registry, auth, admission, storageerrors, defaults, printers, validation…);
// this package builds the server from them, with its listeners (its own address, then the pod bridge's)
// and the kubernetes Service through which pods find it.
package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	extensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	extensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authorization/union"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver/admission"
	"github.com/rayctl/rayctl/pkg/apiserver/auth"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/node"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac/policy"
	satoken "github.com/rayctl/rayctl/pkg/apiserver/auth/serviceaccount"
	"github.com/rayctl/rayctl/pkg/apiserver/lazyopenapi"
	rayopenapi "github.com/rayctl/rayctl/pkg/apiserver/openapi"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/apiserver/podtemplates"
	"github.com/rayctl/rayctl/pkg/apiserver/registry/authentication/tokenreview"
	"github.com/rayctl/rayctl/pkg/apiserver/scheme"
	"github.com/rayctl/rayctl/pkg/apiserver/sharedetcd"
	"github.com/rayctl/rayctl/pkg/apiserver/storageerrors"
	"github.com/rayctl/rayctl/pkg/apiserver/yamlsize"
)

// Config is what the API server needs from the rest of rayctl.
type Config struct {
	// PodDial is how pods/proxy and services/proxy reach pod IPs (rayctl's dials inside the node network
	// namespace); nil dials from this process's own network.
	PodDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Listener, if set, is where the server serves; else it listens on BindAddress:Port.
	Listener net.Listener
	// BindAddress is the address to listen on; nil means 127.0.0.1.
	BindAddress net.IP
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// CA signs every certificate; client certificates must chain to it.
	CA *pki.Authority
	// Serving is the server's certificate.
	Serving *pki.KeyPair
	// ServiceAccountKey signs ServiceAccount tokens (serviceaccounts/token), which the server then accepts
	// as bearer tokens.
	ServiceAccountKey *ecdsa.PrivateKey
	// Loopback is the client certificate the server uses to call itself (a system:masters identity).
	Loopback *pki.KeyPair
	// EtcdEndpoint is etcd's client URL; EtcdClient the certificate to reach it with, and EtcdCAFile
	// the CA (etcd's own) that etcd's serving certificate chains to.
	EtcdEndpoint string
	EtcdClient   *pki.KeyPair
	EtcdCAFile   string
	// EtcdLogger receives the logs of the etcd client every resource's storage shares (see
	// sharedetcd); nil discards them.
	EtcdLogger *zap.Logger
	// CRDs reads the CustomResourceDefinition manifests (YAML or JSON) installed, and Established, before
	// the server reports ready; nil installs none. It is called at start and again when the Ray CRDs'
	// full pod template schema is first needed (see podtemplates): the server does not keep the
	// manifests, a few MB, in between.
	CRDs func() ([][]byte, error)
	// ServiceCIDR is the range ClusterIPs are allocated from; nil means 10.96.0.0/16. Its first address is
	// the kubernetes Service's.
	ServiceCIDR *net.IPNet
	// RBAC are RBAC manifests (YAML) applied, and in force, before the server reports ready; nil means
	// rayctl's bootstrap policy (configs/rbac).
	RBAC [][]byte
	// KubeletClient is the client certificate the server presents to kubelets for pods/log, pods/exec
	// and pods/portforward (kubelets' serving certificates are checked against CA); nil turns those off.
	KubeletClient *pki.KeyPair
	// Audit, when set, receives audit events as AuditPolicy decides (rayctl's chain recorder listens
	// here for accepted writes).
	Audit       audit.Backend
	AuditPolicy audit.PolicyRuleEvaluator
	// WrapStorage, when set, decorates the storage options of every registry, built-in kinds and custom
	// resources alike (rayctl's chain recorder sees the watch events delivered to each watcher there:
	// chainaudit.Watches); WrapHandler wraps the API's handler behind authentication
	// (chainaudit.WithUserAgent).
	WrapStorage func(genericregistry.RESTOptionsGetter) genericregistry.RESTOptionsGetter
	WrapHandler func(http.Handler) http.Handler
	// Debug are extra non-resource handlers by path prefix (e.g. "/debug/chain/"), behind the same
	// authentication and authorization as every other request.
	Debug map[string]http.Handler
	// ReadyChecks are more /readyz checks (etcd's raft leadership, say), answered on every request.
	ReadyChecks []healthz.HealthChecker
	// LongRunning marks more requests (streams under Debug) as exempt from the request timeout.
	LongRunning func(*http.Request) bool
}

// Server is a configured API server, ready to run.
type Server struct {
	// Addr is the host:port the server listens on.
	Addr string
	// LoopbackConfig is a client config with the loopback identity.
	LoopbackConfig *rest.Config
	prepared       interface{ RunWithContext(context.Context) error }
	// listeners are the addresses served: Addr's, and the pod bridge's once ServePods adds it.
	listeners *listeners
	// kubernetesClusterIP is the first address of the service range, the kubernetes Service's.
	kubernetesClusterIP net.IP
}

// New builds the server: it opens the listener, connects storage and installs every API group.
func New(c Config) (*Server, error) {
	ln, err := listen(c)
	if err != nil {
		return nil, err
	}
	served := newListeners(ln)
	addr := ln.Addr().String()

	generic := newGenericConfig(c, addr)
	if err := configureServing(generic, c, served, addr); err != nil {
		return nil, err
	}
	rbacPolicy, err := readRBAC(c.RBAC)
	if err != nil {
		return nil, err
	}
	access, err := configureAuth(generic, c)
	if err != nil {
		return nil, err
	}
	// The CRDs' pod templates are served slim (see bootstrap) and checked by podtemplates' plugin.
	admit, startAdmission, err := admission.New(generic.LoopbackClientConfig, access.nodePods, podtemplates.NewAdmission(c.CRDs))
	if err != nil {
		return nil, err
	}
	generic.AdmissionControl = admit
	configureOpenAPI(generic)
	etcdOptions, etcd, err := configureStorage(generic, c)
	if err != nil {
		return nil, err
	}

	server, crdInformer, err := newExtensionsServer(generic, etcdOptions, etcd, c)
	if err != nil {
		return nil, err
	}
	serviceCIDR, err := installBuiltins(server, generic, c, access)
	if err != nil {
		return nil, err
	}
	for prefix, h := range c.Debug {
		server.Handler.NonGoRestfulMux.HandlePrefix(prefix, h)
	}
	addPostStartHooks(server, c.CRDs, crdInformer, rbacPolicy, startAdmission, access)
	prepared := server.PrepareRun()
	if v3 := lazyopenapi.Install(server, generic.OpenAPIConfig, generic.OpenAPIV3Config); v3 != nil {
		if err := lazyopenapi.ServeCustomResources(v3, crdInformer); err != nil {
			return nil, err
		}
	}

	return &Server{
		Addr:                addr,
		LoopbackConfig:      rest.CopyConfig(generic.LoopbackClientConfig),
		prepared:            prepared,
		listeners:           served,
		kubernetesClusterIP: KubernetesServiceIP(serviceCIDR),
	}, nil
}

// listen returns c.Listener, or a listener on c.BindAddress (127.0.0.1 by default) and c.Port.
func listen(c Config) (net.Listener, error) {
	if c.Listener != nil {
		return c.Listener, nil
	}
	bind := c.BindAddress
	if bind == nil {
		bind = net.IPv4(127, 0, 0, 1)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bind.String(), strconv.Itoa(c.Port)))
	if err != nil {
		return nil, fmt.Errorf("listening for the API server: %w", err)
	}
	return ln, nil
}

// newGenericConfig is the generic server's configuration for the server at addr: request limits, the
// handler chain, the long-running requests, the readiness checks and the audit backend.
func newGenericConfig(c Config, addr string) *genericapiserver.RecommendedConfig {
	generic := genericapiserver.NewRecommendedConfig(extensionsapiserver.Codecs)
	generic.EffectiveVersion = newEffectiveVersion()
	generic.ExternalAddress = addr
	generic.PublicAddress = net.IPv4(127, 0, 0, 1)
	// Bodies over 1.5 MiB get 413. kube-apiserver takes 3 MiB bodies but its etcd refuses values over
	// 1.5 MiB, and its etcd client sends at most 2 MiB, so a 2–3 MiB object fails there as a 500; here
	// the limit is where storage's is, and the answer is a clear 413. (KubeRay's CRDs are ~0.2 MiB as JSON.)
	generic.MaxRequestBodyBytes = 3 << 19
	// A JSON patch's copy operations may add as much as a body may hold (k8s.io/apiserver's default is
	// 3 MiB, as its default body limit).
	generic.JSONPatchMaxCopyBytes = generic.MaxRequestBodyBytes
	wrap := c.WrapHandler
	generic.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		if wrap != nil {
			h = wrap(h)
		}
		h = storageerrors.MarkPatch(rejectCustomResourceProtobuf(h, c.Serializer))
		// A YAML body's aliases may make it as large as twice the body limit (what a body without
		// aliases can count, see yamlsize.Size), not more; checked after authentication, before decoding.
		h = yamlsize.WithLimit(h, c.MaxRequestBodyBytes, 2*c.MaxRequestBodyBytes, c.Serializer)
		return genericapiserver.DefaultBuildHandlerChain(h, c)
	}
	// On shutdown, end open watches (kubectl get -w, informers) after a moment instead of letting the
	// HTTP server wait a minute for them.
	generic.ShutdownWatchTerminationGracePeriod = time.Second
	// Watches and the streams of logs, exec and proxies are exempt from the request timeout, as in
	// kube-apiserver.
	longRunning := genericfilters.BasicLongRunningRequestCheck(
		sets.NewString("watch", "proxy"),
		sets.NewString("attach", "exec", "proxy", "log", "portforward"),
	)
	generic.LongRunningFunc = longRunning
	if c.LongRunning != nil {
		generic.LongRunningFunc = func(r *http.Request, ri *apirequest.RequestInfo) bool {
			return longRunning(r, ri) || c.LongRunning(r)
		}
	}
	generic.AddReadyzChecks(c.ReadyChecks...)
	if c.Audit != nil && c.AuditPolicy != nil {
		generic.AuditBackend, generic.AuditPolicyRuleEvaluator = c.Audit, c.AuditPolicy
	}
	return generic
}

// configureServing sets TLS serving on served (c.Serving, client certificates checked against c.CA) and
// the loopback client configuration (c.Loopback towards 127.0.0.1 on addr's port).
func configureServing(generic *genericapiserver.RecommendedConfig, c Config, served *listeners, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	host := "https://" + net.JoinHostPort("127.0.0.1", port)
	servingCert, err := dynamiccertificates.NewStaticCertKeyContent("apiserver", c.Serving.CertPEM, c.Serving.KeyPEM)
	if err != nil {
		return err
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", c.CA.CertPEM())
	if err != nil {
		return err
	}
	generic.SecureServing = &genericapiserver.SecureServingInfo{
		Listener:      served,
		Cert:          servingCert,
		ClientCA:      clientCA,
		MinTLSVersion: tls.VersionTLS12,
	}
	generic.LoopbackClientConfig = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.CA.CertPEM(),
			CertData: c.Loopback.CertPEM,
			KeyData:  c.Loopback.KeyPEM,
		},
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"},
		QPS:           -1,
		// Uncompressed, as kube-apiserver's loopback client: gzip over loopback costs CPU and saves nothing.
		DisableCompression:        true,
		WarningHandlerWithContext: InternalClientWarnings,
	}
	return nil
}

// authState is what authentication and authorization leave for the later steps: the RBAC authorizer
// (started, and given the bootstrap policy, by post-start hooks), the node authorizer's pod cache (run
// by a post-start hook) and the ServiceAccount token issuer (serviceaccounts/token).
type authState struct {
	rbac     *rbac.Authorizer
	nodePods *node.CachedPods
	tokens   *satoken.Issuer
	// reviewer authenticates the bearer tokens TokenReviews ask about.
	reviewer *tokenreview.REST
}

// configureAuth sets authentication (client certificates chained to c.CA, ServiceAccount tokens signed by
// c.ServiceAccountKey) and authorization (the node authorizer, then RBAC).
func configureAuth(generic *genericapiserver.RecommendedConfig, c Config) (*authState, error) {
	rbacAuthz := rbac.New()
	loopbackClient, err := kubernetes.NewForConfig(generic.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	if c.ServiceAccountKey == nil {
		return nil, fmt.Errorf("the API server needs a service-account signing key")
	}
	tokens := &satoken.Issuer{Key: c.ServiceAccountKey}
	// The node authorizer reads a kubelet's pods from a cache (a LIST through the API server on each of a
	// kubelet's reads made N pods cost N² work), and through the API when the cache has not caught up.
	nodePods := node.NewCachedPods(loopbackClient)
	saTokens := &satoken.Authenticator{Key: &c.ServiceAccountKey.PublicKey, Objects: apiObjects{loopbackClient}}
	generic.Authentication.Authenticator = auth.NewAuthenticator(c.CA.Pool(), saTokens)
	generic.Authentication.APIAudiences = []string{satoken.DefaultIssuer}
	reviewer := &tokenreview.REST{Authenticator: auth.NewBearerAuthenticator(saTokens), APIAudiences: generic.Authentication.APIAudiences}
	if generic.Authorization.Authorizer, err = auth.NewAuthorizer(
		union.NamedAuthorizer{AuthorizerName: "node", Authorizer: node.New(nodePods, node.APIPods{Client: loopbackClient})},
		union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rbacAuthz},
	); err != nil {
		return nil, err
	}
	return &authState{rbac: rbacAuthz, nodePods: nodePods, tokens: tokens, reviewer: reviewer}, nil
}

// configureOpenAPI sets the OpenAPI v2 and v3 documents: the built-in kinds' definitions, titled as
// kube-apiserver's; New serves them through lazyopenapi.
func configureOpenAPI(generic *genericapiserver.RecommendedConfig) {
	namer := openapinamer.NewDefinitionNamer(clientgoscheme.Scheme, extensionsapiserver.Scheme)
	defs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(rayopenapi.GetOpenAPIDefinitions)
	generic.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
	generic.OpenAPIConfig.Info.Title = "Kubernetes"
	generic.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	generic.OpenAPIV3Config.Info.Title = "Kubernetes"
	// Built when first asked for, not in PrepareRun (see lazyopenapi).
	generic.SkipOpenAPIInstallation = true
}

// configureStorage connects the generic configuration to etcd (c.EtcdEndpoint) and enables the API
// versions served; it returns the etcd options and the etcd client shared by every resource's storage,
// which custom resources are stored with too.
func configureStorage(generic *genericapiserver.RecommendedConfig, c Config) (*genericoptions.EtcdOptions, *sharedetcd.Client, error) {
	// Storage: built-in kinds in protobuf, custom resources as apiextensions stores them.
	etcdOptions := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil))
	etcdOptions.StorageConfig.Transport = storagebackend.TransportConfig{
		ServerList:    []string{c.EtcdEndpoint},
		CertFile:      c.EtcdClient.CertFile,
		KeyFile:       c.EtcdClient.KeyFile,
		TrustedCAFile: c.EtcdCAFile,
	}
	etcdOptions.DefaultStorageMediaType = "application/vnd.kubernetes.protobuf"
	etcdOptions.EnableWatchCache = true
	// The Ray CRDs are half a megabyte each: a watch cache would hold a decoded copy of every one next
	// to the apiextensions informer's, for three objects that are read at start-up and seldom after.
	etcdOptions.WatchCacheSizes = []string{"customresourcedefinitions.apiextensions.k8s.io#0"}
	resources := serverstorage.NewResourceConfig()
	resources.EnableVersions(scheme.GroupVersions...)
	for gv := range extensionsapiserver.DefaultAPIResourceConfigSource().GroupVersionConfigs {
		resources.EnableVersions(gv)
	}
	generic.MergedResourceConfig = resources
	encoding := serverstorage.NewDefaultResourceEncodingConfigForEffectiveVersion(scheme.Scheme, generic.EffectiveVersion)
	// events.k8s.io events live with core events, stored as core/v1, as on a real cluster.
	encoding.SetResourceEncoding(eventsv1.Resource("events"), corev1.SchemeGroupVersion, scheme.InternalVersion(eventsv1.SchemeGroupVersion))
	encoding.SetResourceEncoding(corev1.Resource("events"), corev1.SchemeGroupVersion, scheme.InternalVersion(corev1.SchemeGroupVersion))
	storageFactory := serverstorage.NewDefaultStorageFactory(
		etcdOptions.StorageConfig,
		etcdOptions.DefaultStorageMediaType,
		scheme.Codecs,
		encoding,
		resources,
		nil,
	)
	storageFactory.AddCohabitatingResources(corev1.Resource("events"), eventsv1.Resource("events"))
	if err := etcdOptions.ApplyWithStorageFactoryTo(storageFactory, &generic.Config); err != nil {
		return nil, nil, err
	}

	// Storage failures that are the client's doing answer 4xx, and etcd out of space 507, for built-in kinds
	// and custom resources alike (see storageerrors).
	etcd := &sharedetcd.Client{Logger: c.EtcdLogger}
	generic.RESTOptionsGetter = c.storage(generic.RESTOptionsGetter, etcd)
	return etcdOptions, etcd, nil
}

// storage decorates a registries' storage options getter: every resource stored through etcd, the one
// client shared (see sharedetcd); storage failures that are the client's doing answer 4xx, and etcd out
// of space 507 (see storageerrors); then c.WrapStorage.
func (c Config) storage(g genericregistry.RESTOptionsGetter, etcd *sharedetcd.Client) genericregistry.RESTOptionsGetter {
	g = sharedetcd.Getter{RESTOptionsGetter: g, Client: etcd}
	g = storageerrors.Getter{RESTOptionsGetter: g}
	if c.WrapStorage != nil {
		g = c.WrapStorage(g)
	}
	return g
}

// newExtensionsServer builds the apiextensions server from generic, as the only server (not a delegate),
// custom resources stored with etcdOptions, through etcd. It returns the server and its informer on CRDs.
func newExtensionsServer(generic *genericapiserver.RecommendedConfig, etcdOptions *genericoptions.EtcdOptions, etcd *sharedetcd.Client, c Config) (*genericapiserver.GenericAPIServer, cache.SharedIndexInformer, error) {
	extensionsConfig := &extensionsapiserver.Config{
		GenericConfig: generic,
		ExtraConfig: extensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: c.storage(extensionsoptions.NewCRDRESTOptionsGetter(*etcdOptions, generic.ResourceTransformers, generic.StorageObjectCountTracker), etcd),
			MasterCount:          1,
		},
	}
	completed := extensionsConfig.Complete()
	// apiextensions expects to be a delegate behind kube-apiserver and turns discovery off; here it is
	// the only server, so discovery (legacy and aggregated) is ours to serve.
	completed.GenericConfig.EnableDiscovery = true
	extensions, err := completed.New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, nil, err
	}
	server := extensions.GenericAPIServer
	// By the time the HTTP server shuts down, rayctl's components have stopped and requests have drained;
	// what can remain is an HTTP/2 connection opened while shutdown began, which net/http's graceful
	// shutdown never tells to go away and would wait for until the timeout (60 s by default).
	server.ShutdownTimeout = httpShutdownTimeout
	crdInformer := extensions.Informers.Apiextensions().V1().CustomResourceDefinitions().Informer()
	// The informer keeps the CRDs without their managedFields: nothing that reads it looks at them (the CRD
	// handler, the naming, establishing, finalizing and OpenAPI controllers read spec and status, and
	// their status updates without managedFields leave the stored ones as they are), and a Ray CRD's
	// list every field of its schema.
	if err := crdInformer.SetTransform(dropManagedFields); err != nil {
		return nil, nil, err
	}
	return server, crdInformer, nil
}

// dropManagedFields is an informer transform that drops an object's managedFields.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// installBuiltins installs the built-in API groups on server, and returns the service range their
// ClusterIPs come from (c.ServiceCIDR, DefaultServiceCIDR when nil).
func installBuiltins(server *genericapiserver.GenericAPIServer, generic *genericapiserver.RecommendedConfig, c Config, a *authState) (*net.IPNet, error) {
	kubeletTLS, err := kubeletClientTLS(c)
	if err != nil {
		return nil, err
	}
	serviceCIDR := c.ServiceCIDR
	if serviceCIDR == nil {
		_, serviceCIDR, _ = net.ParseCIDR(DefaultServiceCIDR)
	}
	builtins, err := newBuiltins(generic.RESTOptionsGetter, generic.Authorization.Authorizer, a.rbac, serviceCIDR, kubeletTLS, a.tokens, a.reviewer, c.PodDial)
	if err != nil {
		return nil, err
	}
	if err := builtins.install(server); err != nil {
		return nil, err
	}
	return serviceCIDR, nil
}

// addPostStartHooks adds the hooks that run once the server serves: admission's informers, the node
// authorizer's pod cache, RBAC's informers, and the bootstrap (what crds reads, read back through crdInformer;
// rbacPolicy; the kubernetes Service).
func addPostStartHooks(server *genericapiserver.GenericAPIServer, crds func() ([][]byte, error), crdInformer cache.SharedIndexInformer, rbacPolicy []runtime.Object, startAdmission genericapiserver.PostStartHookFunc, a *authState) {
	server.AddPostStartHookOrDie("rayctl-admission-informers", afterWatchCaches(startAdmission,
		corev1.SchemeGroupVersion.WithResource("namespaces"), corev1.SchemeGroupVersion.WithResource("serviceaccounts")))
	server.AddPostStartHookOrDie("node-authorizer-pods", func(ctx genericapiserver.PostStartHookContext) error {
		go a.nodePods.Run(ctx)
		return nil
	})
	// RBAC answers once its informers have synced; until then only system:masters gets through, and
	// this hook keeps /readyz failing.
	rbacResources := make([]schema.GroupVersionResource, 0, 4)
	for _, r := range []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"} {
		rbacResources = append(rbacResources, rbacv1.SchemeGroupVersion.WithResource(r))
	}
	server.AddPostStartHookOrDie("rbac-informers", timed("rbac-informers", afterWatchCaches(func(ctx genericapiserver.PostStartHookContext) error {
		return a.rbac.Start(ctx, ctx.LoopbackClientConfig)
	}, rbacResources...)))
	server.AddPostStartHookOrDie("rayctl-bootstrap", timed("rayctl-bootstrap", func(ctx genericapiserver.PostStartHookContext) error {
		var manifests [][]byte
		if crds != nil {
			var err error
			if manifests, err = crds(); err != nil {
				return err
			}
		}
		return bootstrap(ctx, ctx.LoopbackClientConfig, manifests, crdInformer, rbacPolicy, a.rbac)
	}))
}

// afterWatchCaches is hook, run once the server's watch caches of gvrs are filled (see awaitWatchCaches):
// the informers a hook starts as the server starts serving would otherwise, now and then, find a cache
// not yet filled and wait the second its 429 asks for, holding the server's readiness that long.
func afterWatchCaches(hook genericapiserver.PostStartHookFunc, gvrs ...schema.GroupVersionResource) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		rc, err := rest.UnversionedRESTClientFor(withNegotiation(ctx.LoopbackClientConfig))
		if err != nil {
			return err
		}
		// The wait only saves time: whatever stops it, the hook runs (a hook's error ends the process).
		if err := awaitWatchCaches(ctx, rc, gvrs); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Waiting for watch caches before starting informers")
		}
		return hook(ctx)
	}
}

// timed logs how long the post-start hook named name took (readiness waits for it): with the
// bootstrap's own lines, rayctl.log shows where the "apiserver" start-up step went.
func timed(name string, hook genericapiserver.PostStartHookFunc) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		start := time.Now()
		err := hook(ctx)
		klog.InfoS("post-start hook finished", "hook", name, "took", time.Since(start), "err", err)
		return err
	}
}

// kubeletClientTLS is the TLS client configuration towards kubelets: c.KubeletClient, verified by c.CA.
func kubeletClientTLS(c Config) (*tls.Config, error) {
	if c.KubeletClient == nil {
		return nil, nil
	}
	cert, err := tls.X509KeyPair(c.KubeletClient.CertPEM, c.KubeletClient.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("the kubelet client certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: c.CA.Pool(), MinVersion: tls.VersionTLS12}, nil
}

// readRBAC parses the RBAC manifests, rayctl's own when manifests is nil.
func readRBAC(manifests [][]byte) ([]runtime.Object, error) {
	if manifests == nil {
		var err error
		if manifests, err = policy.ReadFS(configs.RBAC); err != nil {
			return nil, fmt.Errorf("reading the bootstrap RBAC policy: %w", err)
		}
	}
	objs, err := policy.Parse(manifests...)
	if err != nil {
		return nil, fmt.Errorf("reading the bootstrap RBAC policy: %w", err)
	}
	return objs, nil
}

// Close releases a server that is never to run: its listener.
func (s *Server) Close() { s.listeners.Close() }

// Run serves until ctx ends, then shuts down in order.
func (s *Server) Run(ctx context.Context) error {
	return s.prepared.RunWithContext(ctx)
}

// httpShutdownTimeout bounds the HTTP server's graceful shutdown (see New).
const httpShutdownTimeout = 2 * time.Second

// WaitReady returns when /readyz answers ok, or with ctx's error.
func WaitReady(ctx context.Context, cfg *rest.Config) error {
	client, err := rest.UnversionedRESTClientFor(withNegotiation(cfg))
	if err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		res := client.Get().AbsPath("/readyz").Do(ctx)
		var code int
		res.StatusCode(&code)
		return code == 200, nil
	})
}

func withNegotiation(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return c
}
