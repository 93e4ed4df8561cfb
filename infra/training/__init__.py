"""The training runtime: Kubeflow Trainer, the TrainJobs, their images, and the typed models of the training
CRDs."""
