module github.com/d8virt/virtualization-controller

go 1.26.0
