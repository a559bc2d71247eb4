-- Wireshark dissector for Outboard's native message protocol (docs/MESSAGES.md).
--
-- Decodes the 64-byte version-1 header that crates/outboard-wire/src/msg.rs
-- defines, and the payload after it. Registered on UDP port 7373 (the
-- protocol's default port) and as a heuristic UDP dissector, so frames on
-- other ports are found too.
--
-- Usage:
--   tshark -r capture.pcap -X lua_script:tools/wireshark/outboard-msg.lua
--   wireshark -X lua_script:tools/wireshark/outboard-msg.lua capture.pcap
-- or copy this file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders).
--
-- Display filter examples: outboard_msg, outboard_msg.kind == 4,
-- outboard_msg.dst_mailbox == 32, outboard_msg.flags.retransmit == 1.

local HEADER_LEN = 64
local MAGIC = 0x4f42
local VERSION = 1
local DEFAULT_PORT = 7373
local MAX_MESSAGE_LEN = 16 * 1024 * 1024
local MAX_NAME_LEN = 255

-- The names of MsgKind::name in msg.rs.
local KIND_NAMES = {
    [1] = "datagram",
    [2] = "message",
    [3] = "message-ack",
    [4] = "request",
    [5] = "response",
    [6] = "response-ack",
    [7] = "request-ack",
    [8] = "lookup",
    [9] = "lookup-reply",
    [10] = "error",
    [11] = "probe",
}
local KIND_MESSAGE_ACK = 3
local KIND_RESPONSE = 5
-- A response's status: 1 = the server failed on the request (no payload).
local RESPONSE_FAILED = 1
local KIND_LOOKUP = 8
local KIND_ERROR = 10
-- Kinds whose payload is a fragment of a message (MsgKind::carries_fragment).
local CARRIES_FRAGMENT = { [1] = true, [2] = true, [4] = true, [5] = true }

-- MsgStatus in msg.rs, in the same spelling as the kinds.
local STATUS_NAMES = {
    [1] = "no-mailbox",
    [2] = "no-name",
    [3] = "stale-session",
    [4] = "busy",
}
-- For display: kinds other than error send status 0.
local STATUS_VALUES = { [0] = "none" }
for code, name in pairs(STATUS_NAMES) do
    STATUS_VALUES[code] = name
end

local FLAG_ACK_NOW = 0x0001
local FLAG_RETRANSMIT = 0x0002

-- Whether `bit` (a power of two) is set in `v`; plain arithmetic, since Lua
-- 5.2's bit32 and 5.3's bitwise operators are not both available everywhere.
local function has_bit(v, bit)
    return math.floor(v / bit) % 2 == 1
end

local proto = Proto("outboard_msg", "Outboard message protocol")

local f = {
    magic = ProtoField.uint16("outboard_msg.magic", "Magic", base.HEX),
    version = ProtoField.uint8("outboard_msg.version", "Version", base.DEC),
    kind = ProtoField.uint8("outboard_msg.kind", "Kind", base.DEC, KIND_NAMES),
    flags = ProtoField.uint16("outboard_msg.flags", "Flags", base.HEX),
    flag_ack_now = ProtoField.bool("outboard_msg.flags.ack_now", "Ack now", 16, nil, FLAG_ACK_NOW),
    flag_retransmit = ProtoField.bool("outboard_msg.flags.retransmit", "Retransmission", 16, nil, FLAG_RETRANSMIT),
    header_len = ProtoField.uint16("outboard_msg.header_len", "Header length", base.DEC),
    src_mailbox = ProtoField.uint32("outboard_msg.src_mailbox", "Source mailbox", base.DEC),
    dst_mailbox = ProtoField.uint32("outboard_msg.dst_mailbox", "Destination mailbox", base.DEC),
    src_session = ProtoField.uint32("outboard_msg.src_session", "Source session", base.HEX),
    dst_session = ProtoField.uint32("outboard_msg.dst_session", "Destination session", base.HEX),
    id = ProtoField.uint64("outboard_msg.id", "Id", base.DEC),
    ack = ProtoField.uint64("outboard_msg.ack", "Ack", base.DEC),
    sack = ProtoField.uint64("outboard_msg.sack", "Sack", base.HEX),
    credit = ProtoField.uint32("outboard_msg.credit", "Credit", base.DEC),
    offset = ProtoField.uint32("outboard_msg.offset", "Offset", base.DEC),
    total_len = ProtoField.uint32("outboard_msg.total_len", "Total length", base.DEC),
    status = ProtoField.uint32("outboard_msg.status", "Status", base.DEC, STATUS_VALUES),
    extension = ProtoField.bytes("outboard_msg.extension", "Header extension"),
    payload = ProtoField.bytes("outboard_msg.payload", "Payload"),
    name = ProtoField.string("outboard_msg.name", "Name"),
    -- An error frame's `ack` is the refused frame's kind byte; shown by name.
    refused_kind = ProtoField.uint8("outboard_msg.refused_kind", "Refused kind", base.DEC, KIND_NAMES),
}
proto.fields = {
    f.magic, f.version, f.kind, f.flags, f.flag_ack_now, f.flag_retransmit, f.header_len,
    f.src_mailbox, f.dst_mailbox, f.src_session, f.dst_session, f.id, f.ack, f.sack,
    f.credit, f.offset, f.total_len, f.status, f.extension, f.payload, f.name, f.refused_kind,
}

local e_malformed = ProtoExpert.new("outboard_msg.malformed", "Malformed message frame",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_unsupported = ProtoExpert.new("outboard_msg.unsupported", "Unsupported version or kind",
    expert.group.PROTOCOL, expert.severity.WARN)
proto.experts = { e_malformed, e_unsupported }

-- Bytes outside printable ASCII shown as '.', so a name cannot break the Info column.
local function printable(s)
    return (string.gsub(s, "[^\32-\126]", "."))
end

local function malformed(item, text)
    item:add_proto_expert_info(e_malformed, text)
end

local function dissect(tvb, pinfo, tree)
    -- `len` is the frame's length on the wire, which the rules check; `cap` the
    -- bytes captured, which bound what can be read (less under a snap length).
    local len = tvb:reported_len()
    local cap = tvb:len()
    pinfo.cols.protocol:set("OB-MSG")
    local root = tree:add(proto, tvb())

    -- The checks of MsgPacket::check_len; past them every header field is in the buffer.
    if len < HEADER_LEN then
        malformed(root, string.format("frame of %d bytes, shorter than the %d-byte header", len, HEADER_LEN))
        pinfo.cols.info:set(string.format("malformed: %d bytes", len))
        return cap
    end
    if cap < HEADER_LEN then
        pinfo.cols.info:set(string.format("header cut short by the capture (%d of %d bytes)", cap, len))
        return cap
    end
    local magic = tvb:range(0, 2):uint()
    local magic_item = root:add(f.magic, tvb:range(0, 2))
    if magic ~= MAGIC then
        malformed(magic_item, string.format("magic 0x%04x, not 0x%04x (\"OB\")", magic, MAGIC))
        pinfo.cols.info:set("malformed: bad magic")
        return cap
    end
    local version = tvb:range(2, 1):uint()
    local kind = tvb:range(3, 1):uint()
    local flags = tvb:range(4, 2):uint()
    local header_len = tvb:range(6, 2):uint()

    local version_item = root:add(f.version, tvb:range(2, 1))
    local kind_item = root:add(f.kind, tvb:range(3, 1))
    local flags_item = root:add(f.flags, tvb:range(4, 2))
    flags_item:add(f.flag_ack_now, tvb:range(4, 2))
    flags_item:add(f.flag_retransmit, tvb:range(4, 2))
    local hl_item = root:add(f.header_len, tvb:range(6, 2))
    root:add(f.src_mailbox, tvb:range(8, 4))
    root:add(f.dst_mailbox, tvb:range(12, 4))
    root:add(f.src_session, tvb:range(16, 4))
    root:add(f.dst_session, tvb:range(20, 4))
    root:add(f.id, tvb:range(24, 8))
    local ack_item = root:add(f.ack, tvb:range(32, 8))
    root:add(f.sack, tvb:range(40, 8))
    root:add(f.credit, tvb:range(48, 4))
    local offset_item = root:add(f.offset, tvb:range(52, 4))
    local total_item = root:add(f.total_len, tvb:range(56, 4))
    local status_item = root:add(f.status, tvb:range(60, 4))

    local src_mb = tvb:range(8, 4):uint()
    local dst_mb = tvb:range(12, 4):uint()
    local id = tvb:range(24, 8):uint64()
    local ack = tvb:range(32, 8):uint64()
    local credit = tvb:range(48, 4):uint()
    local offset = tvb:range(52, 4):uint()
    local total = tvb:range(56, 4):uint()
    local status = tvb:range(60, 4):uint()

    local kind_name = KIND_NAMES[kind] or string.format("kind-%d", kind)
    local info = string.format("%s id=%s mb %d→%d", kind_name, tostring(id), src_mb, dst_mb)
    local hl_problem = nil
    if header_len < HEADER_LEN then
        hl_problem = string.format("header length %d is under %d", header_len, HEADER_LEN)
    elseif header_len % 4 ~= 0 then
        hl_problem = string.format("header length %d is not a multiple of 4", header_len)
    elseif header_len > len then
        hl_problem = string.format("header length %d is past the frame's %d bytes", header_len, len)
    end
    if hl_problem ~= nil then
        malformed(hl_item, hl_problem)
        pinfo.cols.info:set(info .. " [malformed header length]")
        return cap
    end
    if header_len > cap then
        pinfo.cols.info:set(info .. " [header cut short by the capture]")
        return cap
    end
    if header_len > HEADER_LEN then
        root:add(f.extension, tvb:range(HEADER_LEN, header_len - HEADER_LEN))
    end
    local payload_len = len - header_len
    if cap > header_len then
        local range = tvb:range(header_len, cap - header_len)
        if kind == KIND_LOOKUP then
            root:add(f.name, range)
        else
            root:add(f.payload, range)
        end
    end
    root:append_text(string.format(", %s, %d payload bytes", kind_name, payload_len))

    -- The rules of MsgRepr::parse.
    local problem = nil
    if version ~= VERSION then
        version_item:add_proto_expert_info(e_unsupported, string.format("version %d; this dissector reads %d", version, VERSION))
        problem = "unsupported version"
    elseif KIND_NAMES[kind] == nil then
        kind_item:add_proto_expert_info(e_unsupported, string.format("unknown kind %d", kind))
        problem = "unknown kind"
    elseif CARRIES_FRAGMENT[kind] then
        info = info .. string.format(" off %d/%d", offset, total)
        if total > MAX_MESSAGE_LEN then
            malformed(total_item, string.format("total length over %d", MAX_MESSAGE_LEN))
            problem = "malformed"
        elseif offset + payload_len > total then
            malformed(offset_item, "the fragment ends past the message's total length")
            problem = "malformed"
        elseif payload_len == 0 and total ~= 0 then
            malformed(offset_item, "an empty fragment of a non-empty message")
            problem = "malformed"
        elseif kind == KIND_RESPONSE and status == RESPONSE_FAILED then
            status_item:append_text(" (a response: failed)")
            info = info .. " failed"
            if total ~= 0 then
                malformed(status_item, "a failed response carries no bytes")
                problem = "malformed"
            end
        elseif kind == KIND_RESPONSE and status ~= 0 then
            malformed(status_item, string.format("response status %d (0 or 1)", status))
            problem = "malformed"
        end
    elseif kind == KIND_LOOKUP then
        if payload_len == 0 or payload_len > MAX_NAME_LEN then
            malformed(root, string.format("lookup name of %d bytes (1 to %d allowed)", payload_len, MAX_NAME_LEN))
            problem = "malformed"
        else
            local name = ""
            if cap > header_len then
                name = tvb:raw(header_len, cap - header_len)
            end
            info = info .. string.format(" name=\"%s\"", printable(name))
        end
    elseif kind == KIND_ERROR then
        -- `ack` holds the refused frame's kind byte.
        local refused = -1
        if ack:higher() == 0 and ack:lower() <= 255 then
            refused = ack:lower()
            ack_item:add(f.refused_kind, tvb:range(39, 1)):set_generated()
        end
        info = info .. string.format(" %s refused=%s",
            STATUS_NAMES[status] or string.format("status-%d", status),
            KIND_NAMES[refused] or tostring(ack))
        if STATUS_NAMES[status] == nil then
            malformed(status_item, string.format("unknown status %d", status))
            problem = "malformed"
        elseif payload_len ~= 0 then
            malformed(root, "an error frame carries no payload")
            problem = "malformed"
        end
    else
        if kind == KIND_MESSAGE_ACK then
            info = info .. string.format(" ack=%s credit=%d", tostring(ack), credit)
        end
        if payload_len ~= 0 then
            malformed(root, string.format("a %s frame carries no payload", kind_name))
            problem = "malformed"
        end
    end
    if has_bit(flags, FLAG_ACK_NOW) then
        info = info .. " ack-now"
    end
    if has_bit(flags, FLAG_RETRANSMIT) then
        info = info .. " retransmit"
    end
    if problem ~= nil then
        info = info .. " [" .. problem .. "]"
    end
    pinfo.cols.info:set(info)
    return cap
end

function proto.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- Frames on other ports: the magic, version 1, and room for the header.
local function heuristic(tvb, pinfo, tree)
    if tvb:reported_len() < HEADER_LEN or tvb:len() < 3 then
        return false
    end
    if tvb:range(0, 2):uint() ~= MAGIC or tvb:range(2, 1):uint() ~= VERSION then
        return false
    end
    dissect(tvb, pinfo, tree)
    return true
end

DissectorTable.get("udp.port"):add(DEFAULT_PORT, proto)
proto:register_heuristic("udp", heuristic)
