# gpuwatch daemon image: exporter, alert engine and doctor for the GPUs of one node.
# NVML (libnvidia-ml.so.1) is not in the image: the NVIDIA container toolkit mounts the host's driver
# library when the container asks for GPUs (NVIDIA_VISIBLE_DEVICES) with the "utility" capability.
#   docker build -t gpuwatch:0.1.0 .
#   docker run --gpus all -p 19464:19464 -v "$PWD/token:/etc/gpuwatch-token/token:ro" gpuwatch:0.1.0
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility

WORKDIR /src
COPY . .
RUN pip install ".[kubernetes,stacks]" && rm -rf /src

WORKDIR /
EXPOSE 19464
ENTRYPOINT ["gpuwatch"]
CMD ["daemon", "--listen", "0.0.0.0:19464", "--allow-remote", "--token-file", "/etc/gpuwatch-token/token"]
