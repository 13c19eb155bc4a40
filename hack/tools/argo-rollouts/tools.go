//go:build tools

// Package tools pins Argo Rollouts for the local test cluster: its Rollout CRD (read from
// the module at test time) and its controller.
package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
