module github.com/d8virt/virtualization-controller

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/ulikunitz/xz v0.5.17 // indirect
)
