package validation

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateNamespace checks a Namespace on create: cluster-scoped metadata with
// a DNS-1123 label name, and valid spec finalizer names.
func ValidateNamespace(ns *corev1.Namespace) field.ErrorList {
	allErrs := clusterMeta(&ns.ObjectMeta, NameIsDNSLabel)
	for i, f := range ns.Spec.Finalizers {
		allErrs = append(allErrs, apivalidation.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return allErrs
}

// ValidateNamespaceUpdate checks an update of a Namespace: metadata update
// rules and the new namespace as a whole.
func ValidateNamespaceUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	allErrs := metaUpdate(&newNs.ObjectMeta, &oldNs.ObjectMeta)
	for i, f := range newNs.Spec.Finalizers {
		allErrs = append(allErrs, apivalidation.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return allErrs
}

// ValidateNamespaceStatusUpdate checks an update of namespaces/status: the
// phase must be Active while the namespace is not being deleted and
// Terminating once it is.
func ValidateNamespaceStatusUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	allErrs := metaUpdate(&newNs.ObjectMeta, &oldNs.ObjectMeta)
	p := field.NewPath("status", "phase")
	if newNs.DeletionTimestamp.IsZero() {
		if newNs.Status.Phase != corev1.NamespaceActive {
			allErrs = append(allErrs, field.Invalid(p, newNs.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if newNs.Status.Phase != corev1.NamespaceTerminating {
		allErrs = append(allErrs, field.Invalid(p, newNs.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return allErrs
}

// ValidateConfigMap checks a ConfigMap: metadata, keys of data and
// binaryData (IsConfigMapKey, not present in both) and a total size of at
// most 1 MiB.
func ValidateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	allErrs := namespacedMeta(&cm.ObjectMeta, NameIsDNSSubdomain)
	total := 0
	dataPath, binPath := field.NewPath("data"), field.NewPath("binaryData")
	for _, key := range sortedKeys(cm.Data) {
		allErrs = append(allErrs, configMapKey(key, dataPath.Key(key))...)
		if _, dup := cm.BinaryData[key]; dup {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(cm.Data[key])
	}
	for _, key := range sortedKeys(cm.BinaryData) {
		allErrs = append(allErrs, configMapKey(key, binPath.Key(key))...)
		if _, dup := cm.Data[key]; dup {
			allErrs = append(allErrs, field.Invalid(binPath.Key(key), key, "duplicate of key present in data"))
		}
		total += len(cm.BinaryData[key])
	}
	if total > maxDataSize {
		allErrs = append(allErrs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return allErrs
}

func configMapKey(key string, p *field.Path) field.ErrorList {
	return invalid(p, key, validation.IsConfigMapKey(key))
}

// validateImmutableData enforces the `immutable: true` contract shared by
// ConfigMaps and Secrets.
func validateImmutableData(newImm, oldImm *bool, dataEqual bool) field.ErrorList {
	if oldImm == nil || !*oldImm {
		return nil
	}
	var allErrs field.ErrorList
	if newImm == nil || !*newImm {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if !dataEqual {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	return allErrs
}

// ValidateConfigMapUpdate checks an update of a ConfigMap: metadata update
// rules, the new config map, and the immutable flag (once set, data and the
// flag itself cannot change).
func ValidateConfigMapUpdate(newCM, oldCM *corev1.ConfigMap) field.ErrorList {
	allErrs := metaUpdate(&newCM.ObjectMeta, &oldCM.ObjectMeta)
	equal := apiequalityDeepEqual(newCM.Data, oldCM.Data) && apiequalityDeepEqual(newCM.BinaryData, oldCM.BinaryData)
	allErrs = append(allErrs, validateImmutableData(newCM.Immutable, oldCM.Immutable, equal)...)
	return append(allErrs, ValidateConfigMap(newCM)...)
}

// ValidateSecret checks a Secret: metadata, key names, a total size of at
// most 1 MiB, and the keys each well-known type requires
// (service-account-token, dockercfg, dockerconfigjson, basic-auth, ssh-auth,
// tls).
func ValidateSecret(s *corev1.Secret) field.ErrorList {
	allErrs := namespacedMeta(&s.ObjectMeta, NameIsDNSSubdomain)
	dataPath := field.NewPath("data")
	total := 0
	for _, key := range sortedKeys(s.Data) {
		allErrs = append(allErrs, configMapKey(key, dataPath.Key(key))...)
		total += len(s.Data[key])
	}
	if total > maxDataSize {
		allErrs = append(allErrs, field.TooLong(dataPath, "", maxDataSize))
	}
	require := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				allErrs = append(allErrs, field.Required(dataPath.Key(k), ""))
			}
		}
	}
	validJSON := func(key string) {
		if raw, ok := s.Data[key]; ok {
			var v map[string]any
			if err := json.Unmarshal(raw, &v); err != nil {
				allErrs = append(allErrs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
			}
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			allErrs = append(allErrs, field.Required(metadataPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		require(corev1.DockerConfigKey)
		validJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		require(corev1.DockerConfigJsonKey)
		validJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, hasUser := s.Data[corev1.BasicAuthUsernameKey]
		_, hasPass := s.Data[corev1.BasicAuthPasswordKey]
		if !hasUser && !hasPass {
			require(corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		require(corev1.SSHAuthPrivateKey)
	case corev1.SecretTypeTLS:
		require(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return allErrs
}

// ValidateSecretUpdate checks an update of a Secret: metadata update rules,
// the new secret, an unchanged type, and the immutable flag.
func ValidateSecretUpdate(newS, oldS *corev1.Secret) field.ErrorList {
	allErrs := metaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	allErrs = append(allErrs, immutable(newS.Type, oldS.Type, field.NewPath("type"))...)
	allErrs = append(allErrs, validateImmutableData(newS.Immutable, oldS.Immutable, apiequalityDeepEqual(newS.Data, oldS.Data))...)
	return append(allErrs, ValidateSecret(newS)...)
}

// ValidateServiceAccount checks a ServiceAccount: metadata (name a DNS-1123
// subdomain) and named secret references.
func ValidateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	allErrs := namespacedMeta(&sa.ObjectMeta, apivalidation.ValidateServiceAccountName)
	for i, ref := range sa.ImagePullSecrets {
		if ref.Name == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	return allErrs
}

// ValidateServiceAccountUpdate checks an update of a ServiceAccount.
func ValidateServiceAccountUpdate(newSA, oldSA *corev1.ServiceAccount) field.ErrorList {
	return append(metaUpdate(&newSA.ObjectMeta, &oldSA.ObjectMeta), ValidateServiceAccount(newSA)...)
}

// ValidateNode checks a Node: cluster-scoped metadata with a DNS-1123
// subdomain name, pod CIDRs, taints, addresses and non-negative capacity and
// allocatable quantities.
func ValidateNode(node *corev1.Node) field.ErrorList {
	allErrs := clusterMeta(&node.ObjectMeta, NameIsDNSSubdomain)
	specPath, statusPath := field.NewPath("spec"), field.NewPath("status")
	cidrsPath := specPath.Child("podCIDRs")
	if len(node.Spec.PodCIDRs) > 0 && node.Spec.PodCIDR != node.Spec.PodCIDRs[0] {
		allErrs = append(allErrs, field.Invalid(cidrsPath.Index(0), node.Spec.PodCIDRs[0], "must match `podCIDR`"))
	}
	if len(node.Spec.PodCIDRs) > 2 {
		allErrs = append(allErrs, field.TooMany(cidrsPath, len(node.Spec.PodCIDRs), 2))
	}
	for i, c := range node.Spec.PodCIDRs {
		allErrs = append(allErrs, validCIDR(c, cidrsPath.Index(i))...)
	}
	type taintKey struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := map[taintKey]bool{}
	for i, t := range node.Spec.Taints {
		p := specPath.Child("taints").Index(i)
		allErrs = append(allErrs, qualifiedName(t.Key, p.Child("key"))...)
		allErrs = append(allErrs, labelValue(t.Value, p.Child("value"))...)
		allErrs = append(allErrs, oneOf(t.Effect, p.Child("effect"), supportedTaintEffects...)...)
		k := taintKey{t.Key, t.Effect}
		if seen[k] {
			allErrs = append(allErrs, field.Duplicate(p, "taints must be unique by key and effect pair"))
		}
		seen[k] = true
	}
	for i, a := range node.Status.Addresses {
		p := statusPath.Child("addresses").Index(i)
		if a.Type == "" {
			allErrs = append(allErrs, field.Required(p.Child("type"), ""))
		}
		if a.Address == "" {
			allErrs = append(allErrs, field.Required(p.Child("address"), ""))
		}
	}
	for _, name := range sortedKeys(node.Status.Capacity) {
		allErrs = append(allErrs, validateQuantity(node.Status.Capacity[name], statusPath.Child("capacity").Key(string(name)))...)
	}
	for _, name := range sortedKeys(node.Status.Allocatable) {
		allErrs = append(allErrs, validateQuantity(node.Status.Allocatable[name], statusPath.Child("allocatable").Key(string(name)))...)
	}
	return allErrs
}

// ValidateNodeUpdate checks an update of a Node (or nodes/status): metadata
// update rules, the new node, and that podCIDRs and providerID, once set, do
// not change.
func ValidateNodeUpdate(newNode, oldNode *corev1.Node) field.ErrorList {
	allErrs := metaUpdate(&newNode.ObjectMeta, &oldNode.ObjectMeta)
	allErrs = append(allErrs, ValidateNode(newNode)...)
	if len(oldNode.Spec.PodCIDRs) > 0 && !apiequalityDeepEqual(newNode.Spec.PodCIDRs, oldNode.Spec.PodCIDRs) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if oldNode.Spec.ProviderID != "" && newNode.Spec.ProviderID != oldNode.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return allErrs
}

// ValidateEndpoints checks an Endpoints object: metadata and every subset's
// addresses (valid IPs, hostnames, node names) and ports.
func ValidateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	allErrs := namespacedMeta(&ep.ObjectMeta, NameIsDNSSubdomain)
	for i, ss := range ep.Subsets {
		p := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			allErrs = append(allErrs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j, port := range ss.Ports {
			pp := p.Child("ports").Index(j)
			if port.Name == "" {
				if len(ss.Ports) > 1 {
					allErrs = append(allErrs, field.Required(pp.Child("name"), ""))
				}
			} else {
				allErrs = append(allErrs, dnsLabel(port.Name, pp.Child("name"))...)
			}
			allErrs = append(allErrs, portNum(port.Port, pp.Child("port"))...)
			allErrs = append(allErrs, oneOf(port.Protocol, pp.Child("protocol"), supportedPortProtocols...)...)
		}
	}
	return allErrs
}

func validateEndpointAddress(a *corev1.EndpointAddress, p *field.Path) field.ErrorList {
	allErrs := validIP(a.IP, p.Child("ip"))
	if a.Hostname != "" {
		allErrs = append(allErrs, dnsLabel(a.Hostname, p.Child("hostname"))...)
	}
	if a.NodeName != nil && *a.NodeName != "" {
		allErrs = append(allErrs, dnsSubdomain(*a.NodeName, p.Child("nodeName"))...)
	}
	return allErrs
}

// ValidateEndpointsUpdate checks an update of an Endpoints object.
func ValidateEndpointsUpdate(newEp, oldEp *corev1.Endpoints) field.ErrorList {
	return append(metaUpdate(&newEp.ObjectMeta, &oldEp.ObjectMeta), ValidateEndpoints(newEp)...)
}
