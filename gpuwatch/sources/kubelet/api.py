"""The kubelet's PodResources API v1, the part gpuwatch uses: ``PodResourcesLister.List``.

The message classes are built by protobuf from a descriptor written here, field numbers as in the
kubelet's ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``, rather than from generated ``_pb2`` code
that would pin the protobuf runtime to the generator's version. Fields gpuwatch does not read (CPU ids,
memory, topology, dynamic resources) are left out of the descriptor: protobuf skips unknown fields, so
newer kubelets' answers still parse.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "v1"
SERVICE = f"{PACKAGE}.PodResourcesLister"
LIST_METHOD = f"/{SERVICE}/List"

_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_ONE = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_MANY = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

#: message -> (field name, number, type, label, message type name or "")
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MESSAGE, _MANY, "PodResources")],
    "PodResources": [("name", 1, _STRING, _ONE, ""), ("namespace", 2, _STRING, _ONE, ""),
                     ("containers", 3, _MESSAGE, _MANY, "ContainerResources")],
    "ContainerResources": [("name", 1, _STRING, _ONE, ""), ("devices", 2, _MESSAGE, _MANY, "ContainerDevices")],
    "ContainerDevices": [("resource_name", 1, _STRING, _ONE, ""), ("device_ids", 2, _STRING, _MANY, "")],
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="gpuwatch/kubelet/podresources_v1.proto", package=PACKAGE,
                                               syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            msg.field.add(name=field_name, number=number, type=kind, label=label,
                          type_name=f".{PACKAGE}.{type_name}" if type_name else None)
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _class(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


ListPodResourcesRequest = _class("ListPodResourcesRequest")
ListPodResourcesResponse = _class("ListPodResourcesResponse")
PodResources = _class("PodResources")
ContainerResources = _class("ContainerResources")
ContainerDevices = _class("ContainerDevices")
