package rbac

import (
	"context"
	"fmt"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Start watches the RBAC objects through cfg (the server's own loopback identity) until ctx ends, and
// returns once the informers have synced, from which moment the authorizer answers. It is meant for a
// post-start hook, so that the server does not report ready before.
func (a *Authorizer) Start(ctx context.Context, cfg *rest.Config) error {
	if a.Ready() {
		return fmt.Errorf("the RBAC authorizer is already started")
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	rbac := factory.Rbac().V1()
	l := &Listers{
		Roles:               rbac.Roles().Lister(),
		ClusterRoles:        rbac.ClusterRoles().Lister(),
		RoleBindings:        rbac.RoleBindings().Lister(),
		ClusterRoleBindings: rbac.ClusterRoleBindings().Lister(),
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the RBAC informer for %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	a.listers.Store(l)
	return nil
}

// WaitFor returns once the authorizer sees each of objs (Roles, ClusterRoles and their bindings) at its
// resourceVersion or a later one, so that what was just written is in force; or with ctx's error.
func (a *Authorizer) WaitFor(ctx context.Context, objs ...runtime.Object) error {
	var missing string
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		l := a.listers.Load()
		if l == nil {
			missing = "the RBAC informers' first sync"
			return false, nil
		}
		for _, o := range objs {
			seen, name, err := l.has(o)
			if err != nil {
				return false, err
			}
			if !seen {
				missing = name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", missing, err)
	}
	return nil
}

// has reports whether the listers hold o at its resourceVersion or a later one.
func (l *Listers) has(o runtime.Object) (bool, string, error) {
	var cached interface{ GetResourceVersion() string }
	var err error
	var kind, name, version string
	switch o := o.(type) {
	case *rbacv1.ClusterRole:
		kind, name, version = "ClusterRole", o.Name, o.ResourceVersion
		cached, err = l.ClusterRoles.Get(o.Name)
	case *rbacv1.ClusterRoleBinding:
		kind, name, version = "ClusterRoleBinding", o.Name, o.ResourceVersion
		cached, err = l.ClusterRoleBindings.Get(o.Name)
	case *rbacv1.Role:
		kind, name, version = "Role", o.Namespace+"/"+o.Name, o.ResourceVersion
		cached, err = l.Roles.Roles(o.Namespace).Get(o.Name)
	case *rbacv1.RoleBinding:
		kind, name, version = "RoleBinding", o.Namespace+"/"+o.Name, o.ResourceVersion
		cached, err = l.RoleBindings.RoleBindings(o.Namespace).Get(o.Name)
	default:
		return false, "", fmt.Errorf("not an RBAC object: %T", o)
	}
	desc := fmt.Sprintf("%s %s", kind, name)
	if err != nil {
		return false, desc, nil
	}
	return newerOrSame(cached.GetResourceVersion(), version), desc, nil
}

// newerOrSame compares resourceVersions, which this server takes from etcd revisions.
func newerOrSame(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}
