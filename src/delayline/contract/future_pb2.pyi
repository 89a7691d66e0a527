from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Future(_message.Message):
    __slots__ = ("callBackTopic", "callBackKey", "callBack")
    CALLBACKTOPIC_FIELD_NUMBER: _ClassVar[int]
    CALLBACKKEY_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_FIELD_NUMBER: _ClassVar[int]
    callBackTopic: str
    callBackKey: str
    callBack: bytes
    def __init__(self, callBackTopic: _Optional[str] = ..., callBackKey: _Optional[str] = ..., callBack: _Optional[bytes] = ...) -> None: ...
