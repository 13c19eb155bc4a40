//go:build tools

// Package tools pins the CNCF distribution registry that the local test cluster serves
// images and charts from.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
