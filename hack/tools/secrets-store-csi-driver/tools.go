//go:build tools

// Package tools pins the Secrets Store CSI Driver for the local test cluster: its CRDs
// (SecretProviderClass, SecretProviderClassPodStatus, read from the module at test time),
// its node plugin, and its fake provider (built by ./fake-provider).
package tools

import _ "sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver"
