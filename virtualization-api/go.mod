module github.com/d8virt/virtualization-api

go 1.26.0
