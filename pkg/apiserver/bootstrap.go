package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac/policy"
	"github.com/rayctl/rayctl/pkg/apiserver/podtemplates"
)

// SystemNamespaces exist from the first start, as on a real cluster.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces, installs the CRDs, waiting until each is Established and its
// custom resources' watch cache is filled (see establishAndWarm), and applies the RBAC policy, waiting until authz has it in force. It runs as a post-start hook, so /readyz
// fails until it is done. crdInformer is the server's own informer on CRDs, which the install reads
// instead of the API (see informerCRDs).
func bootstrap(ctx context.Context, cfg *rest.Config, crds [][]byte, crdInformer cache.SharedIndexInformer, rbacPolicy []runtime.Object, authz *rbac.Authorizer) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	errs := make([]error, len(SystemNamespaces)+2)
	var wg, namespaces sync.WaitGroup
	for i, name := range SystemNamespaces {
		namespaces.Go(func() {
			errs[i] = retry(ctx, func() error {
				_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("creating namespace %s: %w", name, errs[i])
			}
		})
	}
	extensions, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	wg.Go(func() {
		view := informerCRDs{crdInformer}
		names, ready, err := writeCRDs(ctx, extensions, crds, view, true, newNameAcceptor(view))
		if err == nil {
			err = establishAndWarm(ctx, client.CoreV1().RESTClient(), view, names, ready)
		}
		errs[len(SystemNamespaces)] = err
	})
	// The policy holds Roles in system namespaces, so it follows them.
	namespaces.Wait()
	errs[len(SystemNamespaces)+1] = applyRBAC(ctx, client, rbacPolicy, authz)
	wg.Wait()
	return errors.Join(errs...)
}

// applyRBAC creates or updates the policy's roles and bindings and waits until authz enforces them.
// The objects are independent of each other (a binding may name a role not yet stored), so they are
// applied side by side, rbacWriters at a time: one after another, the policy's round trips were a large
// part of a warm start.
func applyRBAC(ctx context.Context, client kubernetes.Interface, objs []runtime.Object, authz *rbac.Authorizer) error {
	stored := make([]runtime.Object, len(objs))
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, rbacWriters)
	for i, o := range objs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = retry(ctx, func() error {
				out, err := policy.Apply(ctx, client, []runtime.Object{o})
				if err == nil {
					stored[i] = out[0]
				}
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("applying the RBAC policy: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := authz.WaitFor(waitCtx, stored...); err != nil {
		return fmt.Errorf("RBAC policy not in force: %w", err)
	}
	klog.InfoS("RBAC policy applied", "objects", len(stored))
	return nil
}

// rbacWriters bounds the RBAC policy's requests in flight during start-up.
const rbacWriters = 8

// InstallCRDs creates or updates each CRD manifest on the server cfg reaches and waits until all are
// Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, manifests [][]byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	view := apiCRDs{client.ApiextensionsV1().CustomResourceDefinitions()}
	names, ready, err := writeCRDs(ctx, client, manifests, view, false, nil)
	if err != nil {
		return err
	}
	return waitEstablished(ctx, view, names, ready)
}

// crdView is where the installer reads the CRDs' state from.
type crdView interface {
	// get returns the CRD named name as stored (not to be modified), or a NotFound error.
	get(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error)
	// waitFor returns once every CRD named in pending is as cond wants it.
	waitFor(ctx context.Context, pending map[string]bool, cond func(*apiextensionsv1.CustomResourceDefinition) bool) error
}

// writeCRDs creates or updates each CRD manifest through client, reading their state from state; with
// slim, the CRDs' pod templates are served slim (see podtemplates.Slim: only for this process's server,
// whose admission checks them); with accept (not nil), a CRD created is given its names and Established
// at once (see nameAcceptor). It returns the CRDs' names and, for each, whether it is Established already (so
// there is nothing to wait for).
func writeCRDs(ctx context.Context, client apiextensionsclient.Interface, manifests [][]byte, state crdView, slim bool, accept *nameAcceptor) ([]string, []bool, error) {
	names := make([]string, len(manifests))
	errs := make([]error, len(manifests))
	ready := make([]bool, len(manifests))
	var wg sync.WaitGroup
	for i, m := range manifests {
		// Reading a large CRD manifest, and the server validating it, cost CPU: they are done side by
		// side, and a manifest is read only when its CRD is to be written.
		wg.Go(func() {
			names[i], ready[i], errs[i] = installCRD(ctx, client.ApiextensionsV1().RESTClient(), state, m, slim, accept)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	klog.InfoS("CRDs written", "count", len(names))
	return names, ready, nil
}

// waitEstablished waits until each CRD named (ready says which are Established already) is Established.
func waitEstablished(ctx context.Context, state crdView, names []string, ready []bool) error {
	pending := map[string]bool{}
	for i, name := range names {
		if !ready[i] {
			pending[name] = true
		}
	}
	if len(pending) > 0 {
		waitCtx, cancel := context.WithTimeout(ctx, establishTimeout)
		defer cancel()
		if err := state.waitFor(waitCtx, pending, established); err != nil {
			return fmt.Errorf("CRDs %v did not become Established within %s: %w", sortedKeys(pending), establishTimeout, err)
		}
	}
	klog.InfoS("CRDs established", "count", len(names))
	return nil
}

// establishAndWarm waits until the CRDs named are Established (see waitEstablished) and their custom
// resources' watch caches filled (see warmWatchCaches). A CRD's custom resources are served, and its
// storage built, once its names are accepted, before the establishing controller marks it Established:
// each CRD's cache is warmed from then on, beside the wait for the others, rather than after all four.
// (The storage built then stays: the Established condition changes neither the spec nor the names.)
func establishAndWarm(ctx context.Context, rc rest.Interface, state crdView, names []string, ready []bool) error {
	errs := make([]error, len(names)+1)
	var wg sync.WaitGroup
	wg.Go(func() { errs[len(names)] = waitEstablished(ctx, state, names, ready) })
	for i, name := range names {
		wg.Go(func() {
			waitCtx, cancel := context.WithTimeout(ctx, establishTimeout)
			defer cancel()
			if err := state.waitFor(waitCtx, map[string]bool{name: true}, served); err != nil {
				errs[i] = fmt.Errorf("CRD %s not served within %s: %w", name, establishTimeout, err)
				return
			}
			errs[i] = warmWatchCaches(ctx, rc, state, []string{name})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	klog.InfoS("custom resources' watch caches filled", "crds", len(names))
	return nil
}

// warmWatchCaches makes the server build the storage of every served version of the CRDs named and
// waits until each one's watch cache has its initial list. The API server builds a custom resource's
// storage, and starts filling its watch cache, on the first request for it; until the cache is filled
// every watch is refused with 429 and Retry-After: 1, so a client's first watch (a controller's
// informer) would wait a second after /readyz said ready. A watch accepted is the cache's own answer
// that it is filled; it is closed at once.
func warmWatchCaches(ctx context.Context, rc rest.Interface, state crdView, names []string) error {
	var gvrs []schema.GroupVersionResource
	for _, name := range names {
		crd, err := state.get(ctx, name)
		if err != nil {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gvrs = append(gvrs, schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural})
			}
		}
	}
	return awaitWatchCaches(ctx, rc, gvrs)
}

// awaitWatchCaches waits until the watch cache of each of gvrs has its initial list. Until then the
// cache refuses every watch with 429 and Retry-After: 1 (an informer's first request is a watch that
// lists, client-go's watch-list), and client-go obeys: an informer started a moment too early waits a
// whole second.
// Here the watch is asked again every warmRetry; one accepted is the cache's own answer that it is
// filled, and is closed at once.
func awaitWatchCaches(ctx context.Context, rc rest.Interface, gvrs []schema.GroupVersionResource) error {
	errs := make([]error, len(gvrs))
	var wg sync.WaitGroup
	for i, gvr := range gvrs {
		path := []string{"/apis", gvr.Group, gvr.Version, gvr.Resource}
		if gvr.Group == "" {
			path = []string{"/api", gvr.Version, gvr.Resource}
		}
		wg.Go(func() {
			errs[i] = retryEvery(ctx, warmRetry, func() error {
				// Not client-go's own retry of a 429, which would wait the second Retry-After asks for.
				body, err := rc.Get().AbsPath(path...).
					Param("watch", "true").Param("resourceVersion", "0").MaxRetries(0).Stream(ctx)
				if err == nil {
					body.Close()
				}
				return err
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("watching %s: %w", gvr.GroupResource(), errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// establishTimeout bounds the wait for the CRDs written to become Established.
const establishTimeout = time.Minute

// apiCRDs reads CRDs through the API: for a server other than this process's.
type apiCRDs struct {
	crds apiextensionsv1client.CustomResourceDefinitionInterface
}

func (a apiCRDs) get(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	return a.crds.Get(ctx, name, metav1.GetOptions{})
}

// waitFor watches the CRDs. A watch rather than a poll: each read of a Ray CRD decodes and encodes half
// a megabyte, which a poll every few milliseconds would spend the start-up's CPU on while the server
// establishes them. (No precondition: the initial list arrives as events, and a precondition would wait
// for it by polling.)
func (a apiCRDs) waitFor(ctx context.Context, pending map[string]bool, cond func(*apiextensionsv1.CustomResourceDefinition) bool) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return a.crds.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return a.crds.Watch(ctx, opts)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		if crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition); ok && cond(crd) {
			delete(pending, crd.Name)
		}
		return len(pending) == 0, nil
	})
	return err
}

// informerCRDs reads CRDs from the API server's own informer on them (the one its CRD handler and
// controllers share), in process: neither a read nor a watch of the CRDs through the API, each of
// which would encode, send and decode every Ray CRD, half a megabyte, again.
type informerCRDs struct {
	informer cache.SharedIndexInformer
}

func (i informerCRDs) get(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	// Told when it has synced, not polled for every 100 ms as cache.WaitForCacheSync does: on a restart,
	// the CRDs stored Established, this wait is the install's only one.
	select {
	case <-i.informer.HasSyncedChecker().Done():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	obj, exists, err := i.informer.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(apiextensionsv1.Resource("customresourcedefinitions"), name)
	}
	return obj.(*apiextensionsv1.CustomResourceDefinition), nil
}

// list returns every CRD the informer has (not to be modified), once it has synced.
func (i informerCRDs) list(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if _, err := i.get(ctx, ""); err != nil && !apierrors.IsNotFound(err) {
		return nil, err // not synced before ctx ended
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range i.informer.GetStore().List() {
		out = append(out, obj.(*apiextensionsv1.CustomResourceDefinition))
	}
	return out, nil
}

func (i informerCRDs) waitFor(ctx context.Context, pending map[string]bool, cond func(*apiextensionsv1.CustomResourceDefinition) bool) error {
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	reg, err := i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
	})
	if err != nil {
		return err
	}
	defer i.informer.RemoveEventHandler(reg)
	for {
		for name := range pending {
			if crd, err := i.get(ctx, name); err == nil && cond(crd) {
				delete(pending, name)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ManifestHashAnnotation records the hash of the manifest a CRD was installed from, so a restart with
// the same manifests writes nothing.
const ManifestHashAnnotation = "rayctl.io/manifest-sha256"

// installCRD creates the CRD manifest describes (its pod templates slim with slim; its names accepted and
// Established at once by accept, if not nil: see nameAcceptor), or updates it when the stored one (as state has it)
// came from another manifest or another choice of slim. It returns the CRD's name and whether it is
// already Established (so there is nothing to wait for).
func installCRD(ctx context.Context, rc rest.Interface, state crdView, manifest []byte, slim bool, accept *nameAcceptor) (string, bool, error) {
	manifest, err := configs.ManifestJSON(manifest)
	if err != nil {
		return "", false, fmt.Errorf("reading a CRD manifest: %w", err)
	}
	name, err := crdName(manifest)
	if err != nil {
		return "", false, fmt.Errorf("reading a CRD manifest: %w", err)
	}
	h := sha256.New()
	if slim {
		h.Write([]byte(slimHashPrefix))
	}
	h.Write(manifest)
	hash := hex.EncodeToString(h.Sum(nil))
	var crd *apiextensionsv1.CustomResourceDefinition
	var ready bool
	err = retry(ctx, func() error {
		existing, err := state.get(ctx, name)
		if err != nil {
			// client-go's Get returns an empty object beside its error: never take it for the stored CRD.
			existing = nil
		}
		switch {
		case err == nil && existing.Annotations[ManifestHashAnnotation] == hash:
			ready = established(existing)
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
		if crd == nil {
			if crd, err = readCRD(manifest, name, hash); err != nil {
				return err
			}
			if slim {
				podtemplates.Slim(crd)
			}
			if accept != nil {
				accept.claim(crd)
			}
		}
		if existing == nil {
			req := rc.Post().Resource("customresourcedefinitions").Body(crd).Do(ctx)
			err := req.Error()
			if apierrors.IsAlreadyExists(err) {
				// The view had not caught up with a CRD created meanwhile: read it again.
				err = apierrors.NewConflict(apiextensionsv1.Resource("customresourcedefinitions"), name, err)
			}
			if err == nil && accept != nil {
				// Created: the retry ends here whatever accept says (the controllers do it otherwise).
				created := &apiextensionsv1.CustomResourceDefinition{}
				aerr := req.Into(created)
				if aerr == nil {
					aerr = accept.accept(ctx, rc, created)
				}
				if aerr != nil {
					klog.InfoS("CRD names left to apiextensions' controllers", "crd", name, "reason", aerr)
				}
			}
			return err
		}
		// The server's answer, the whole CRD again, is not decoded: nothing here reads it.
		update := crd.DeepCopy()
		update.ResourceVersion = existing.ResourceVersion
		return rc.Put().Resource("customresourcedefinitions").Name(name).Body(update).Do(ctx).Error()
	})
	if err != nil {
		return name, false, fmt.Errorf("installing CRD %s: %w", name, err)
	}
	return name, ready, nil
}

// nameAcceptor does at once, in one status write, what apiextensions' naming and establishing
// controllers do for a new CRD in two, one CRD at a time each (see accept). It serves one install: it
// knows the names of every CRD the install writes (see claim), which the server's view may not show yet.
type nameAcceptor struct {
	crds informerCRDs
	// mu makes each CRD's check of the names in use and its status write one step, and orders claims
	// with them.
	mu sync.Mutex
	// claims are the spec names (defaulted as the server does) of the CRDs this install writes, by CRD name.
	claims map[string]claim
}

// claim is the group and names a CRD written asks for.
type claim struct {
	group string
	names apiextensionsv1.CustomResourceDefinitionNames
}

func newNameAcceptor(crds informerCRDs) *nameAcceptor {
	return &nameAcceptor{crds: crds, claims: map[string]claim{}}
}

// claim records the names crd asks for: it is called before crd is written. A CRD accepted after that
// sees them (see accept); one accepted before was written first, so apiextensions' naming controller,
// reading the CRDs in the order they were written, sees its names before crd's.
func (a *nameAcceptor) claim(crd *apiextensionsv1.CustomResourceDefinition) {
	spec := apiextensionsv1.CustomResourceDefinitionSpec{Names: *crd.Spec.Names.DeepCopy()}
	apiextensionsv1.SetDefaults_CustomResourceDefinitionSpec(&spec)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[crd.Name] = claim{group: crd.Spec.Group, names: spec.Names}
}

// accept sets the accepted names of created, a CRD just created (as the server answered, with its
// resourceVersion and defaulted names), to its spec's names, and NamesAccepted and Established with the
// controllers' reasons and messages (so that they find nothing left to do), keeping any other condition.
// It does so when no name is in use in the group, as apiextensions' naming controller decides: plural,
// singular and short names among the other CRDs' accepted ones, kind and list kind among theirs, and
// here also among the names the other CRDs of this install ask for. Otherwise, or if the CRD changed
// since created (another controller wrote its status), it returns an error and leaves the CRD to the
// controllers, which report a conflict. Established says the server serves the custom resources: it
// does once its CRD informer has the names, which readiness waits for (see warmWatchCaches).
func (a *nameAcceptor) accept(ctx context.Context, rc rest.Interface, created *apiextensionsv1.CustomResourceDefinition) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	crds, err := a.crds.list(ctx)
	if err != nil {
		return err
	}
	inUse := []claim{}
	for _, other := range crds {
		switch {
		case other.Name != created.Name:
			inUse = append(inUse, claim{group: other.Spec.Group, names: other.Status.AcceptedNames})
		case other.ResourceVersion != created.ResourceVersion:
			// Seen written since: the write would be refused, after the server decoded the whole CRD.
			return errStatusChanged
		}
	}
	for name, c := range a.claims {
		if name != created.Name {
			inUse = append(inUse, c)
		}
	}
	if err := namesConflict(created.Spec.Group, created.Spec.Names, inUse); err != nil {
		return err
	}
	crd := created.DeepCopy()
	crd.Status.AcceptedNames = crd.Spec.Names
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted,
		Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found"})
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
		Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"})
	return retry(ctx, func() error {
		// The server's answer, the whole CRD again, is not decoded: nothing here reads it.
		err := rc.Put().Resource("customresourcedefinitions").Name(crd.Name).SubResource("status").Body(crd).Do(ctx).Error()
		if apierrors.IsConflict(err) {
			return errStatusChanged // not retried: the controllers saw the CRD first
		}
		return err
	})
}

// errStatusChanged says a CRD was written since created: its names are left to apiextensions.
var errStatusChanged = errors.New("the CRD changed since created")

// namesConflict returns an error naming the first of names already in use in group by a CRD in inUse.
// Resource names (plural, singular, short names) and kinds (kind, list kind) are apart, as the server
// tells them apart.
func namesConflict(group string, names apiextensionsv1.CustomResourceDefinitionNames, inUse []claim) error {
	resources, kinds := map[string]bool{}, map[string]bool{}
	for _, c := range inUse {
		if c.group != group {
			continue
		}
		for _, n := range append([]string{c.names.Plural, c.names.Singular}, c.names.ShortNames...) {
			resources[n] = true
		}
		kinds[c.names.Kind], kinds[c.names.ListKind] = true, true
	}
	for _, n := range append([]string{names.Plural, names.Singular}, names.ShortNames...) {
		if n != "" && resources[n] {
			return fmt.Errorf("resource name %q is already in use in group %s", n, group)
		}
	}
	for _, n := range []string{names.Kind, names.ListKind} {
		if n != "" && kinds[n] {
			return fmt.Errorf("kind %q is already in use in group %s", n, group)
		}
	}
	return nil
}

// slimHashPrefix goes before a manifest in the hash of a CRD installed with slim pod templates, so that
// a CRD installed whole (by an earlier rayctl) is replaced.
const slimHashPrefix = "podtemplates.Slim/v1\n"

// crdName returns the name of the CRD manifest (JSON) describes, reading as little of it as it can.
func crdName(manifest []byte) (string, error) {
	// The metadata comes before the spec (keys are sorted): the decoder stops there, not at the end of
	// a schema of half a megabyte.
	dec := json.NewDecoder(bytes.NewReader(manifest))
	t, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("a CRD manifest that is not JSON: %w", err)
	}
	if t != json.Delim('{') {
		return "", fmt.Errorf("a CRD manifest that is not a JSON object (it begins with %v)", t)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		var meta struct {
			Name string `json:"name"`
		}
		if err := dec.Decode(&meta); err != nil {
			return "", err
		}
		if meta.Name == "" {
			break
		}
		return meta.Name, nil
	}
	return "", fmt.Errorf("a CRD manifest without metadata.name")
}

// readCRD decodes the CRD manifest describes (strictly: see configs.DecodeCRD), named name, and marks
// it with the manifest's hash.
func readCRD(manifest []byte, name, hash string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := configs.DecodeCRD(manifest)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of CRD %s: %w", name, err)
	}
	if crd.Name != name {
		return nil, fmt.Errorf("the manifest of CRD %s names %q", name, crd.Name)
	}
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	crd.Annotations[ManifestHashAnnotation] = hash
	return crd, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)
}

// served says whether the API server serves crd's custom resources: once its names are accepted (as
// apiextensions' handler decides), Established or not yet.
func served(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) || established(crd)
}

// retry runs f until it succeeds, ends with an error that is not worth retrying, or ctx ends. The server's
// own endpoints may answer 503 or 429 for a moment while it starts.
func retry(ctx context.Context, f func() error) error {
	return retryEvery(ctx, 20*time.Millisecond, f)
}

// warmRetry is how often warmWatchCaches asks again while a watch cache fills (a millisecond or two for
// a CRD's few objects; the cache answers 429 until then).
const warmRetry = 5 * time.Millisecond

// retryEvery is retry, trying again every interval.
func retryEvery(ctx context.Context, interval time.Duration, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = f()
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			klog.V(2).InfoS("retrying during start-up", "err", last)
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// retriable reports whether err is worth retrying while the server starts.
func retriable(err error) bool {
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsConflict(err) || apierrors.IsInternalError(err)
}
