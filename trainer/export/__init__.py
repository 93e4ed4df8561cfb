"""Export of the trainer's checkpoints to Hugging Face folders (safetensors), under the trainer's identity."""
