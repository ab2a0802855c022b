-- mpa_v2.lua: RFC 6581 "Enhanced RDMA Connection Establishment" data for Wireshark < 4.6.
--
-- Wireshark 4.0 to 4.4 dissects MPA request/reply frames (RFC 5044 section 7.1) but shows
-- the RFC 6581 block only as the first four bytes of iwarp_mpa.privatedata. This
-- post-dissector decodes that block for every MPA request or reply with Rev 2 and the
-- enhanced flag (0x10, which 4.0 shows inside iwarp_mpa.res) and adds filterable fields:
--
--   mpa_v2.p2p             A: peer-to-peer connection model     (IRD word, 0x8000)
--   mpa_v2.zero_len_send   B: zero-length Send as RTR            (IRD word, 0x4000)
--   mpa_v2.write_rtr       C: zero-length RDMA Write as RTR      (ORD word, 0x8000)
--   mpa_v2.read_rtr        D: zero-length RDMA Read as RTR       (ORD word, 0x4000)
--   mpa_v2.ird, mpa_v2.ord 14-bit values; 0x3FFF means "no IRD/ORD" (irdma's IETF_NO_IRD_ORD)
--   mpa_v2.no_ird_ord      true when IRD or ORD is 0x3FFF
--   mpa_v2.request         true for a request, false for a reply
--   mpa_v2.reject          the reply's R flag
--   mpa_v2.private_data    the ULP private data after the block
--   mpa_v2.private_data_len
--   mpa_v2.private_data_text  the same bytes as text (non-printable bytes shown as '.')
--   mpa_v2.rtr             the RTR types set, as words: "send", "write", "read"
--
-- The same values also carry Wireshark 4.6's own field names, so that a display filter
-- written for 4.6 works on 4.0 to 4.4 with this plugin (4.6 has them built in; there the
-- plugin leaves them to Wireshark):
--
--   iwarp_mpa.enhanced_flag, iwarp_mpa.enhanced, iwarp_mpa.enhanced.a/.b/.c/.D,
--   iwarp_mpa.enhanced.ird, iwarp_mpa.enhanced.ord
--   iwarp_mpa.legacy, iwarp_mpa.legacy.ird, iwarp_mpa.legacy.ord (uint32): the
--     [MS-SMBD] 6.1 IRD/ORD negotiate header of SMB Direct over iWARP, 8 bytes of private
--     data (after the RFC 6581 block when there is one), IRD then ORD, big-endian as
--     Linux SMB Direct writes them;
--   iwarp_mpa.broken_le_legacy: the same header written little-endian (old cifs.ko
--     and ksmbd), its values then read little-endian.
--
-- NVMe over Fabrics on RDMA (include/linux/nvme-rdma.h), read from the ULP private data
-- by content, which Wireshark's own NVMe-RDMA dissector reads only from InfiniBand CM:
--
--   mpa_v2.nvme            a request's struct nvme_rdma_cm_req (32 bytes, RECFMT 0,
--                          bytes 10-31 zero), the reply or reject of such a request
--   mpa_v2.nvme.recfmt, .qid, .hrqsize, .hsqsize, .cntlid   (little-endian)
--   mpa_v2.nvme.crqsize    the accept's struct nvme_rdma_cm_rep
--   mpa_v2.nvme.sts        the reject's struct nvme_rdma_cm_rej status, with its name
--
-- SMB Direct ([MS-SMBD] 2.2) in the first segment (MO 0) of an untagged RDMAP Send on
-- queue 0 (RFC 5040 section 4.2, RFC 5041 section 4.4), by content, under its own
-- post-dissector "mpa_emu" (little-endian values):
--
--   mpa_emu.smbd           the message's kind: Negotiate Request (MSN 1, 20 bytes, versions
--                          including 0x0100, or any versions on port 5445 or 445),
--                          Negotiate Response (MSN 1, 32 bytes), Data Transfer (its payload
--                          opens with an SMB2 header, or its stream negotiated)
--   mpa_emu.smbd.min_version, .max_version, .negotiated_version, .credits_requested,
--   .credits_granted, .status, .max_read_write_size, .preferred_send_size,
--   .max_receive_size, .max_fragmented_size       (Negotiate Request / Response, 2.2.1-2.2.2)
--   mpa_emu.smbd.flags, .response_requested, .remaining_data_length, .data_offset,
--   .data_length, .smb2_command                   (Data Transfer, 2.2.3; [MS-SMB2] 2.2.1)
--
-- erdma's private MPA dialect (drivers/infiniband/hw/erdma/erdma_cm.h), by content: an
-- MPA request or reply ("MPA ID Req Frame" / "MPA ID Rep Frame") of revision 129
-- (MPA_REVISION_EXT_1), whose 20-byte header is followed by the 8 bytes of struct
-- erdma_mpa_ext that PD_Length does not count, then PD_Length bytes of private data.
-- Wireshark's MPA dissector reads the extension as private data; under the "mpa_emu"
-- post-dissector (big-endian values, as erdma_send_mpareqrep writes them):
--
--   mpa_emu.erdma          "request", "reply" or "reject" (the R flag, 0x20)
--   mpa_emu.erdma.cookie   the extension's cookie
--   mpa_emu.erdma.bits     the extension's bits word
--   mpa_emu.erdma.cc       its low four bits (MPA_EXT_FLAG_CC), named as enum
--                          erdma_cc_alg names them (erdma.h)
--   mpa_emu.erdma.private_data, .private_data_len, .private_data_text
--                          the private data after the extension
--
-- Expert infos: mpa_emu.erdma.short (the frame ends before PD_Length bytes of private
-- data after the extension).
--
-- Expert infos: mpa_v2.short_block (fewer than 4 bytes), mpa_v2.no_rtr and
-- mpa_v2.many_rtr (an accepting P2P reply must choose exactly one RTR type),
-- mpa_v2.rtr_not_offered (the reply chose a type its request did not offer).
--
-- Install: `mpa-emu wireshark-plugin --install` (see docs/wireshark.md, "MPA v2 Lua plugin").
-- Tested with tshark 4.0 (Lua 5.2).

-- Wireshark refuses a second protocol with the same name, so when the plugin is loaded
-- twice (from the personal plugin folder and again with -X lua_script:) the second copy
-- stands down and the first one dissects.
if _G.MPA_EMU_MPA_V2_LOADED then
    return
end
_G.MPA_EMU_MPA_V2_LOADED = true

local mpa_v2 = Proto("mpa_v2", "MPA v2 Enhanced Connection Data (RFC 6581)")

local PEER_TO_PEER = 0x8000
local ZERO_LEN_SEND = 0x4000
local WRITE_RTR = 0x8000
local READ_RTR = 0x4000
local VALUE_MASK = 0x3FFF
local ENHANCED_FLAG = 0x10
local BLOCK_SIZE = 4
-- erdma_cm.h: MPA_REVISION_EXT_1, the revision of Alibaba's Elastic RDMA dialect.
local ERDMA_REVISION = 129

local pf = {
    request = ProtoField.bool("mpa_v2.request", "Request"),
    reject = ProtoField.bool("mpa_v2.reject", "Reject (R)"),
    ird_word = ProtoField.uint16("mpa_v2.ird_word", "IRD word", base.HEX),
    p2p = ProtoField.bool("mpa_v2.p2p", "Peer-to-peer (A)", 16, nil, PEER_TO_PEER),
    zero_len_send = ProtoField.bool("mpa_v2.zero_len_send", "Zero-length Send RTR (B)", 16,
        nil, ZERO_LEN_SEND),
    ird = ProtoField.uint16("mpa_v2.ird", "IRD", base.DEC, nil, VALUE_MASK),
    ord_word = ProtoField.uint16("mpa_v2.ord_word", "ORD word", base.HEX),
    write_rtr = ProtoField.bool("mpa_v2.write_rtr", "Zero-length RDMA Write RTR (C)", 16, nil,
        WRITE_RTR),
    read_rtr = ProtoField.bool("mpa_v2.read_rtr", "Zero-length RDMA Read RTR (D)", 16, nil,
        READ_RTR),
    ord = ProtoField.uint16("mpa_v2.ord", "ORD", base.DEC, nil, VALUE_MASK),
    no_ird_ord = ProtoField.bool("mpa_v2.no_ird_ord", "No IRD/ORD value (0x3FFF)"),
    private_data = ProtoField.bytes("mpa_v2.private_data", "ULP private data"),
    private_data_len = ProtoField.uint16("mpa_v2.private_data_len", "ULP private data length"),
    private_data_text = ProtoField.string("mpa_v2.private_data_text", "ULP private data (text)"),
    rtr = ProtoField.string("mpa_v2.rtr", "RTR types (send, write, read)"),
    nvme = ProtoField.none("mpa_v2.nvme", "NVMe-RDMA private data"),
    nvme_recfmt = ProtoField.uint16("mpa_v2.nvme.recfmt", "Record format", base.DEC),
    nvme_qid = ProtoField.uint16("mpa_v2.nvme.qid", "Queue ID", base.DEC),
    nvme_hrqsize = ProtoField.uint16("mpa_v2.nvme.hrqsize", "Host receive queue size",
        base.DEC),
    nvme_hsqsize = ProtoField.uint16("mpa_v2.nvme.hsqsize", "Host send queue size (0's based)",
        base.DEC),
    nvme_cntlid = ProtoField.uint16("mpa_v2.nvme.cntlid", "Controller ID", base.HEX),
    nvme_crqsize = ProtoField.uint16("mpa_v2.nvme.crqsize", "Controller receive queue size",
        base.DEC),
    nvme_sts = ProtoField.uint16("mpa_v2.nvme.sts", "Reject status", base.DEC, {
        [1] = "NVME_RDMA_CM_INVALID_LEN", [2] = "NVME_RDMA_CM_INVALID_RECFMT",
        [3] = "NVME_RDMA_CM_INVALID_QID", [4] = "NVME_RDMA_CM_INVALID_HSQSIZE",
        [5] = "NVME_RDMA_CM_INVALID_HRQSIZE", [6] = "NVME_RDMA_CM_NO_RSC",
        [7] = "NVME_RDMA_CM_INVALID_IRD", [8] = "NVME_RDMA_CM_INVALID_ORD",
        [9] = "NVME_RDMA_CM_INVALID_CNTLID" }),
}
mpa_v2.fields = {
    pf.request, pf.reject, pf.ird_word, pf.p2p, pf.zero_len_send, pf.ird, pf.ord_word,
    pf.write_rtr, pf.read_rtr, pf.ord, pf.no_ird_ord, pf.private_data, pf.private_data_len,
    pf.private_data_text, pf.rtr, pf.nvme, pf.nvme_recfmt, pf.nvme_qid, pf.nvme_hrqsize,
    pf.nvme_hsqsize, pf.nvme_cntlid, pf.nvme_crqsize, pf.nvme_sts,
}

-- Wireshark 4.6's names (packet-iwarp-mpa.c in 4.6 registers them itself: Field.new
-- succeeds there, and the plugin then does not add its copies).
local native_46 = pcall(Field.new, "iwarp_mpa.enhanced.ird")
local ws = nil
if not native_46 then
    ws = {
        enhanced_flag = ProtoField.bool("iwarp_mpa.enhanced_flag", "Enhanced RDMA Connection"),
        enhanced = ProtoField.none("iwarp_mpa.enhanced", "Enhanced Negotiation"),
        a = ProtoField.bool("iwarp_mpa.enhanced.a", "Control Flag A", 16, nil, PEER_TO_PEER),
        b = ProtoField.bool("iwarp_mpa.enhanced.b", "Control Flag B", 16, nil, ZERO_LEN_SEND),
        ird = ProtoField.uint16("iwarp_mpa.enhanced.ird", "Inbound RDMA Read Queue Depth",
            base.DEC, nil, VALUE_MASK),
        c = ProtoField.bool("iwarp_mpa.enhanced.c", "Control Flag C", 16, nil, WRITE_RTR),
        d = ProtoField.bool("iwarp_mpa.enhanced.D", "Control Flag D", 16, nil, READ_RTR),
        ord = ProtoField.uint16("iwarp_mpa.enhanced.ord", "Outbound RDMA Read Queue Depth",
            base.DEC, nil, VALUE_MASK),
        legacy = ProtoField.none("iwarp_mpa.legacy", "Legacy IRD/ORD Negotiation"),
        legacy_ird = ProtoField.uint32("iwarp_mpa.legacy.ird",
            "Legacy Inbound RDMA Read Queue Depth"),
        legacy_ord = ProtoField.uint32("iwarp_mpa.legacy.ord",
            "Legacy Outbound RDMA Read Queue Depth"),
        broken_le = ProtoField.none("iwarp_mpa.broken_le_legacy",
            "Broken Little-Endian Legacy IRD/ORD Negotiation"),
    }
    for _, field in pairs(ws) do
        mpa_v2.fields[#mpa_v2.fields + 1] = field
    end
end
local LEGACY_SIZE = 8
local LEGACY_MAX = 0xFFFF

local ef_short = ProtoExpert.new("mpa_v2.short_block", "Enhanced flag set but fewer than 4 "
    .. "bytes of private data (RFC 6581 section 5)", expert.group.MALFORMED, expert.severity.ERROR)
local ef_no_rtr = ProtoExpert.new("mpa_v2.no_rtr", "Reply selects no RTR type while P2P is set "
    .. "(RFC 6581 section 5)", expert.group.PROTOCOL, expert.severity.WARN)
local ef_many_rtr = ProtoExpert.new("mpa_v2.many_rtr", "Reply selects more than one RTR "
    .. "type (RFC 6581 section 5: exactly one)", expert.group.PROTOCOL, expert.severity.WARN)
local ef_not_offered = ProtoExpert.new("mpa_v2.rtr_not_offered", "Reply selects an RTR type "
    .. "the request did not offer", expert.group.PROTOCOL, expert.severity.WARN)
mpa_v2.experts = { ef_short, ef_no_rtr, ef_many_rtr, ef_not_offered }

-- RTR types offered by the request of each TCP stream, as a bit set (1 send, 2 write,
-- 4 read), filled in when the request is dissected.
local offered_rtr = {}

-- Fields of Wireshark's own MPA dissector, read frame by frame.
local f_key_req = Field.new("iwarp_mpa.key.req")
local f_key_rep = Field.new("iwarp_mpa.key.rep")
local f_rej = Field.new("iwarp_mpa.rej_flag")
local f_res = Field.new("iwarp_mpa.res")
local f_rev = Field.new("iwarp_mpa.rev")
local f_pdlength = Field.new("iwarp_mpa.pdlength")
local f_pdata = Field.new("iwarp_mpa.privatedata")
local f_stream = Field.new("tcp.stream")

local function printable(bytes)
    local out = {}
    for i = 0, bytes:len() - 1 do
        local b = bytes:get_index(i)
        if b >= 0x20 and b < 0x7F then
            out[#out + 1] = string.char(b)
        else
            out[#out + 1] = "."
        end
    end
    return table.concat(out)
end

-- Occurrences of a field in this frame, in order.
local function all(field)
    return { field() }
end

-- One MPA header in the frame: request or reply, and its fields, matched by position.
local function headers()
    local found = {}
    for _, fi in ipairs(all(f_key_req)) do
        found[#found + 1] = { request = true, offset = fi.offset, range = fi.range }
    end
    for _, fi in ipairs(all(f_key_rep)) do
        found[#found + 1] = { request = false, offset = fi.offset, range = fi.range }
    end
    table.sort(found, function(a, b) return a.offset < b.offset end)
    return found
end

-- [MS-SMBD] 6.1: exactly 8 bytes of ULP private data, IRD then ORD; big-endian when the
-- values read so are ones a device offers, else little-endian (old cifs.ko / ksmbd).
local function legacy_values(range)
    if ws == nil or range:len() ~= LEGACY_SIZE then
        return nil
    end
    local ird, ord = range(0, 4):uint(), range(4, 4):uint()
    if ird <= LEGACY_MAX and ord <= LEGACY_MAX and (ird ~= 0 or ord ~= 0) then
        return ird, ord, false
    end
    ird, ord = range(0, 4):le_uint(), range(4, 4):le_uint()
    if ird <= LEGACY_MAX and ord <= LEGACY_MAX and (ird ~= 0 or ord ~= 0) then
        return ird, ord, true
    end
    return nil
end

local function decode_legacy(tree, range)
    local ird, ord, little = legacy_values(range)
    if ird == nil then
        return
    end
    local legacy = tree:add(ws.legacy, range)
    if little then
        legacy:add(ws.broken_le, range)
        legacy:add_le(ws.legacy_ird, range(0, 4))
        legacy:add_le(ws.legacy_ord, range(4, 4))
        legacy:append_text(string.format(": IRD %d, ORD %d (little-endian)", ird, ord))
    else
        legacy:add(ws.legacy_ird, range(0, 4))
        legacy:add(ws.legacy_ord, range(4, 4))
        legacy:append_text(string.format(": IRD %d, ORD %d", ird, ord))
    end
end

-- TCP streams whose MPA request carried an NVMe-RDMA connect request.
local nvme_streams = {}

local function zero_from(range, first)
    for i = first, range:len() - 1 do
        if range(i, 1):uint() ~= 0 then return false end
    end
    return true
end

-- The NVMe-RDMA private data of nvme-rdma.h, by content: a 32-byte request with RECFMT 0,
-- bytes 10-31 zero and a queue asked for; then that stream's accept (32 bytes) or
-- reject (4 bytes, struct nvme_rdma_cm_rej).
local function decode_nvme(tree, range, request, rej)
    local stream = f_stream()
    local key = stream and stream.value
    local len = range:len()
    if request then
        if len ~= 32 or range(0, 2):le_uint() ~= 0 or not zero_from(range, 10)
                or (range(4, 2):le_uint() == 0 and range(6, 2):le_uint() == 0) then
            return
        end
        if key ~= nil then nvme_streams[key] = true end
        local t = tree:add(pf.nvme, range)
        t:add_le(pf.nvme_recfmt, range(0, 2))
        t:add_le(pf.nvme_qid, range(2, 2))
        t:add_le(pf.nvme_hrqsize, range(4, 2))
        t:add_le(pf.nvme_hsqsize, range(6, 2))
        t:add_le(pf.nvme_cntlid, range(8, 2))
        t:append_text(string.format(": QID %d, HRQSIZE %d, HSQSIZE %d",
            range(2, 2):le_uint(), range(4, 2):le_uint(), range(6, 2):le_uint()))
        return
    end
    if key == nil or not nvme_streams[key] or range(0, 2):le_uint() ~= 0 then
        return
    end
    if rej and len == 4 then
        local t = tree:add(pf.nvme, range)
        t:add_le(pf.nvme_recfmt, range(0, 2))
        t:add_le(pf.nvme_sts, range(2, 2))
        t:append_text(string.format(": reject status %d", range(2, 2):le_uint()))
    elseif not rej and len == 32 and zero_from(range, 4) then
        local t = tree:add(pf.nvme, range)
        t:add_le(pf.nvme_recfmt, range(0, 2))
        t:add_le(pf.nvme_crqsize, range(2, 2))
        t:append_text(string.format(": CRQSIZE %d", range(2, 2):le_uint()))
    end
end

local function decode_block(tree, pinfo, hdr, rej, pdata_fi)
    local subtree = tree:add(mpa_v2, pdata_fi.range)
    subtree:add(pf.request, hdr.request)
    if not hdr.request then
        subtree:add(pf.reject, rej)
    end
    local range = pdata_fi.range
    if range:len() < BLOCK_SIZE then
        subtree:add_proto_expert_info(ef_short)
        return
    end
    local ird_range = range(0, 2)
    local ord_range = range(2, 2)
    local ird_word = ird_range:uint()
    local ord_word = ord_range:uint()
    if ws ~= nil then
        subtree:add(ws.enhanced_flag, true)
        local enhanced = subtree:add(ws.enhanced, range(0, BLOCK_SIZE))
        enhanced:add(ws.a, ird_range)
        enhanced:add(ws.b, ird_range)
        enhanced:add(ws.ird, ird_range)
        enhanced:add(ws.c, ord_range)
        enhanced:add(ws.d, ord_range)
        enhanced:add(ws.ord, ord_range)
    end
    local ird_item = subtree:add(pf.ird_word, ird_range)
    ird_item:add(pf.p2p, ird_range)
    ird_item:add(pf.zero_len_send, ird_range)
    ird_item:add(pf.ird, ird_range)
    local ord_item = subtree:add(pf.ord_word, ord_range)
    ord_item:add(pf.write_rtr, ord_range)
    ord_item:add(pf.read_rtr, ord_range)
    ord_item:add(pf.ord, ord_range)
    local ird = bit32.band(ird_word, VALUE_MASK)
    local ord = bit32.band(ord_word, VALUE_MASK)
    subtree:add(pf.no_ird_ord, ird == VALUE_MASK or ord == VALUE_MASK)
    local rtr_set, names = 0, {}
    if bit32.band(ird_word, ZERO_LEN_SEND) ~= 0 then rtr_set, names[#names + 1] = 1, "send" end
    if bit32.band(ord_word, WRITE_RTR) ~= 0 then
        rtr_set, names[#names + 1] = rtr_set + 2, "write"
    end
    if bit32.band(ord_word, READ_RTR) ~= 0 then
        rtr_set, names[#names + 1] = rtr_set + 4, "read"
    end
    subtree:add(pf.rtr, table.concat(names, " "))
    local stream = f_stream()
    local key = stream and stream.value
    if hdr.request then
        if key ~= nil then offered_rtr[key] = rtr_set end
    elseif not rej and bit32.band(ird_word, PEER_TO_PEER) ~= 0 then
        if rtr_set == 0 then
            subtree:add_proto_expert_info(ef_no_rtr)
        elseif #names > 1 then
            subtree:add_proto_expert_info(ef_many_rtr)
        end
        local offer = key ~= nil and offered_rtr[key] or nil
        if offer ~= nil and bit32.band(rtr_set, bit32.bnot(offer)) ~= 0 then
            subtree:add_proto_expert_info(ef_not_offered)
        end
    end
    local ulp_len = range:len() - BLOCK_SIZE
    subtree:add(pf.private_data_len, ulp_len)
    if ulp_len > 0 then
        local ulp = range(BLOCK_SIZE, ulp_len)
        subtree:add(pf.private_data, ulp)
        subtree:add(pf.private_data_text, ulp, printable(ulp:bytes()))
        decode_legacy(subtree, ulp)
        decode_nvme(subtree, ulp, hdr.request, rej)
    end
    subtree:append_text(string.format(": IRD %d, ORD %d", ird, ord))
    if pinfo.cols.info then
        pinfo.cols.info:append(string.format(" [v2 IRD=%d ORD=%d]", ird, ord))
    end
end

-- The occurrence of a field that starts ``offset`` bytes into the same MPA frame's data.
local function at(list, offset)
    for _, fi in ipairs(list) do
        if fi.offset == offset then
            return fi
        end
    end
    return nil
end

function mpa_v2.dissector(_, pinfo, tree)
    local hdrs = headers()
    if #hdrs == 0 then
        return
    end
    local rejs, ress, revs, pdlens, pdatas =
        all(f_rej), all(f_res), all(f_rev), all(f_pdlength), all(f_pdata)
    for _, hdr in ipairs(hdrs) do
        -- Flags at key + 16, Rev at + 17, PD_Length at + 18, private data at + 20
        -- (RFC 5044 section 7.1). Wireshark omits PD_Length and the private data when
        -- PD_Length is over 512, and the private data when it is 0.
        local res, rev = at(ress, hdr.offset + 16), at(revs, hdr.offset + 17)
        if res ~= nil and rev ~= nil and rev.value == 2
                and bit32.band(res.value, ENHANCED_FLAG) ~= 0 then
            local rej_fi = at(rejs, hdr.offset + 16)
            local rej = (not hdr.request) and rej_fi ~= nil and rej_fi.value or false
            local pdata_fi = at(pdatas, hdr.offset + 20)
            local pdlen_fi = at(pdlens, hdr.offset + 18)
            if pdata_fi ~= nil then
                decode_block(tree, pinfo, hdr, rej, pdata_fi)
            elseif pdlen_fi ~= nil and pdlen_fi.value < BLOCK_SIZE then
                local subtree = tree:add(mpa_v2, hdr.range)
                subtree:add(pf.request, hdr.request)
                subtree:add_proto_expert_info(ef_short)
            end
        elseif rev ~= nil and rev.value == ERDMA_REVISION then
            -- erdma's dialect: Wireshark's private data is the extension's bytes; the
            -- "mpa_emu" post-dissector below decodes the frame.
        else
            -- No RFC 6581 block: the whole private data may be the legacy header.
            local pdata_fi = at(pdatas, hdr.offset + 20)
            if pdata_fi ~= nil and legacy_values(pdata_fi.range) ~= nil then
                local subtree = tree:add(mpa_v2, pdata_fi.range)
                subtree:add(pf.request, hdr.request)
                decode_legacy(subtree, pdata_fi.range)
            elseif pdata_fi ~= nil then
                local rej_fi = at(rejs, hdr.offset + 16)
                local rej = (not hdr.request) and rej_fi ~= nil and rej_fi.value or false
                decode_nvme(tree, pdata_fi.range, hdr.request, rej)
            end
        end
    end
end

register_postdissector(mpa_v2)

-- SMB Direct in RDMAP Sends (see the header). ------------------------------------------

local mpa_emu = Proto("mpa_emu", "mpa_emu: upper protocol in iWARP Sends")
local SMBD_V1 = 0x0100
local SMBD_REQUEST_SIZE, SMBD_RESPONSE_SIZE = 20, 32
local SMBD_DATA_MIN, SMBD_DATA_OFFSET = 20, 24
local UNTAGGED_HEADER = 18
local SMB2_COMMANDS = {
    [0] = "NEGOTIATE", [1] = "SESSION_SETUP", [2] = "LOGOFF", [3] = "TREE_CONNECT",
    [4] = "TREE_DISCONNECT", [5] = "CREATE", [6] = "CLOSE", [7] = "FLUSH", [8] = "READ",
    [9] = "WRITE", [10] = "LOCK", [11] = "IOCTL", [12] = "CANCEL", [13] = "ECHO",
    [14] = "QUERY_DIRECTORY", [15] = "CHANGE_NOTIFY", [16] = "QUERY_INFO",
    [17] = "SET_INFO", [18] = "OPLOCK_BREAK" }
local sf = {
    message = ProtoField.string("mpa_emu.smbd", "SMB Direct message"),
    min_version = ProtoField.uint16("mpa_emu.smbd.min_version", "MinVersion", base.HEX),
    max_version = ProtoField.uint16("mpa_emu.smbd.max_version", "MaxVersion", base.HEX),
    negotiated_version = ProtoField.uint16("mpa_emu.smbd.negotiated_version",
        "NegotiatedVersion", base.HEX),
    credits_requested = ProtoField.uint16("mpa_emu.smbd.credits_requested",
        "CreditsRequested", base.DEC),
    credits_granted = ProtoField.uint16("mpa_emu.smbd.credits_granted", "CreditsGranted",
        base.DEC),
    status = ProtoField.uint32("mpa_emu.smbd.status", "Status", base.HEX,
        { [0x00000000] = "STATUS_SUCCESS", [0xC00000BB] = "STATUS_NOT_SUPPORTED" }),
    max_read_write_size = ProtoField.uint32("mpa_emu.smbd.max_read_write_size",
        "MaxReadWriteSize", base.DEC),
    preferred_send_size = ProtoField.uint32("mpa_emu.smbd.preferred_send_size",
        "PreferredSendSize", base.DEC),
    max_receive_size = ProtoField.uint32("mpa_emu.smbd.max_receive_size", "MaxReceiveSize",
        base.DEC),
    max_fragmented_size = ProtoField.uint32("mpa_emu.smbd.max_fragmented_size",
        "MaxFragmentedSize", base.DEC),
    flags = ProtoField.uint16("mpa_emu.smbd.flags", "Flags", base.HEX),
    response_requested = ProtoField.bool("mpa_emu.smbd.response_requested",
        "SMB_DIRECT_RESPONSE_REQUESTED", 16, nil, 0x0001),
    remaining_data_length = ProtoField.uint32("mpa_emu.smbd.remaining_data_length",
        "RemainingDataLength", base.DEC),
    data_offset = ProtoField.uint32("mpa_emu.smbd.data_offset", "DataOffset", base.DEC),
    data_length = ProtoField.uint32("mpa_emu.smbd.data_length", "DataLength", base.DEC),
    smb2_command = ProtoField.uint16("mpa_emu.smbd.smb2_command", "SMB2 command", base.DEC,
        SMB2_COMMANDS),
}
local ERDMA_EXT_SIZE, ERDMA_HDR_LEN = 8, 28
local ERDMA_CC = { [0] = "NewReno", [1] = "Cubic", [2] = "HPCC-RTT", [3] = "HPCC-ECN",
    [4] = "HPCC-INT" }
local erdma_f = {
    frame = ProtoField.string("mpa_emu.erdma", "erdma MPA frame (revision 129)"),
    cookie = ProtoField.uint32("mpa_emu.erdma.cookie", "Extension cookie", base.HEX),
    bits = ProtoField.uint32("mpa_emu.erdma.bits", "Extension bits", base.HEX),
    cc = ProtoField.uint32("mpa_emu.erdma.cc", "Congestion control (MPA_EXT_FLAG_CC)",
        base.DEC, ERDMA_CC, 0x0000000F),
    private_data = ProtoField.bytes("mpa_emu.erdma.private_data", "Private data"),
    private_data_len = ProtoField.uint16("mpa_emu.erdma.private_data_len",
        "Private data length (PD_Length)"),
    private_data_text = ProtoField.string("mpa_emu.erdma.private_data_text",
        "Private data (text)"),
}
local ef_erdma_short = ProtoExpert.new("mpa_emu.erdma.short", "erdma MPA frame shorter than "
    .. "its header, extension and PD_Length bytes", expert.group.MALFORMED,
    expert.severity.ERROR)
mpa_emu.experts = { ef_erdma_short }

mpa_emu.fields = {
    erdma_f.frame, erdma_f.cookie, erdma_f.bits, erdma_f.cc, erdma_f.private_data,
    erdma_f.private_data_len, erdma_f.private_data_text,
    sf.message, sf.min_version, sf.max_version, sf.negotiated_version,
    sf.credits_requested, sf.credits_granted, sf.status, sf.max_read_write_size,
    sf.preferred_send_size, sf.max_receive_size, sf.max_fragmented_size, sf.flags,
    sf.response_requested, sf.remaining_data_length, sf.data_offset, sf.data_length,
    sf.smb2_command,
}

local f_fpdu = Field.new("iwarp_mpa.fpdu")
local f_tcp_srcport = Field.new("tcp.srcport")
local f_tcp_dstport = Field.new("tcp.dstport")

-- TCP streams with an SMB Direct Negotiate Request or Response seen: their later Sends
-- are read as Data Transfer messages even when no SMB2 header opens the payload.
local smbd_streams = {}

local function smbd_port()
    for _, f in ipairs({ f_tcp_srcport(), f_tcp_dstport() }) do
        if f ~= nil and (f.value == 5445 or f.value == 445) then return true end
    end
    return false
end

local function smb2_protocol_id(range)
    if range:len() < 4 then return false end
    local id = range(0, 4):bytes()
    return id:get_index(1) == 0x53 and id:get_index(2) == 0x4D and id:get_index(3) == 0x42
        and (id:get_index(0) == 0xFE or id:get_index(0) == 0xFD or id:get_index(0) == 0xFC)
end

local function add_negotiate_request(tree, body)
    local t = tree:add(sf.message, body, "Negotiate Request")
    t:add_le(sf.min_version, body(0, 2))
    t:add_le(sf.max_version, body(2, 2))
    t:add_le(sf.credits_requested, body(6, 2))
    t:add_le(sf.preferred_send_size, body(8, 4))
    t:add_le(sf.max_receive_size, body(12, 4))
    t:add_le(sf.max_fragmented_size, body(16, 4))
end

local function add_negotiate_response(tree, body)
    local t = tree:add(sf.message, body, "Negotiate Response")
    t:add_le(sf.min_version, body(0, 2))
    t:add_le(sf.max_version, body(2, 2))
    t:add_le(sf.negotiated_version, body(4, 2))
    t:add_le(sf.credits_requested, body(8, 2))
    t:add_le(sf.credits_granted, body(10, 2))
    t:add_le(sf.status, body(12, 4))
    t:add_le(sf.max_read_write_size, body(16, 4))
    t:add_le(sf.preferred_send_size, body(20, 4))
    t:add_le(sf.max_receive_size, body(24, 4))
    t:add_le(sf.max_fragmented_size, body(28, 4))
end

-- [MS-SMBD] 2.2.3; ``whole`` when the segment is the message's last (L set), so that its
-- length bounds DataOffset + DataLength.
local function data_transfer(body, whole, known)
    local size = body:len()
    if size < SMBD_DATA_MIN then return false end
    local flags, reserved = body(4, 2):le_uint(), body(6, 2):le_uint()
    local offset, length = body(12, 4):le_uint(), body(16, 4):le_uint()
    if bit32.band(flags, 0xFFFE) ~= 0 or reserved ~= 0 then return false end
    if length == 0 then
        return known and offset == 0 and (not whole or size == SMBD_DATA_MIN
            or size == SMBD_DATA_OFFSET)
    end
    if offset < SMBD_DATA_OFFSET or offset % 8 ~= 0 or offset >= size
            or (whole and offset + length > size) then
        return false
    end
    return known or smb2_protocol_id(body(offset, size - offset))
end

local function add_data_transfer(tree, body)
    local t = tree:add(sf.message, body, "Data Transfer")
    t:add_le(sf.credits_requested, body(0, 2))
    t:add_le(sf.credits_granted, body(2, 2))
    local flags = t:add_le(sf.flags, body(4, 2))
    flags:add_le(sf.response_requested, body(4, 2))
    t:add_le(sf.remaining_data_length, body(8, 4))
    t:add_le(sf.data_offset, body(12, 4))
    t:add_le(sf.data_length, body(16, 4))
    local offset = body(12, 4):le_uint()
    if body(16, 4):le_uint() > 0 and offset + 64 <= body:len() then
        local smb2 = body(offset, body:len() - offset)
        -- [MS-SMB2] 2.2.1: ProtocolId 0xFE 'SMB', StructureSize 64, Command at 12.
        if smb2(0, 1):uint() == 0xFE and smb2_protocol_id(smb2)
                and smb2(4, 2):le_uint() == 64 then
            t:add_le(sf.smb2_command, smb2(12, 2))
        end
    end
end

-- erdma's frames (see the header): each MPA key Wireshark found in this frame's own bytes
-- with revision 129 behind it.
local function decode_erdma(tvb, tree)
    for _, hdr in ipairs(headers()) do
        local at_key = hdr.offset
        if at_key + ERDMA_HDR_LEN <= tvb:len() and tvb(at_key, 16):bytes() == hdr.range:bytes()
                and tvb(at_key + 17, 1):uint() == ERDMA_REVISION then
            local flags = tvb(at_key + 16, 1):uint()
            local pdlen = tvb(at_key + 18, 2):uint()
            local kind = hdr.request and "request"
                or (bit32.band(flags, 0x20) ~= 0 and "reject" or "reply")
            local avail = tvb:len() - (at_key + ERDMA_HDR_LEN)
            local size = ERDMA_HDR_LEN + math.min(pdlen, avail)
            local t = tree:add(mpa_emu, tvb(at_key, size))
            local frame = t:add(erdma_f.frame, tvb(at_key, size), kind)
            frame:add(erdma_f.cookie, tvb(at_key + 20, 4))
            local bits = frame:add(erdma_f.bits, tvb(at_key + 24, 4))
            bits:add(erdma_f.cc, tvb(at_key + 24, 4))
            frame:add(erdma_f.private_data_len, tvb(at_key + 18, 2))
            if pdlen > 0 and avail > 0 then
                local pd = tvb(at_key + ERDMA_HDR_LEN, math.min(pdlen, avail))
                frame:add(erdma_f.private_data, pd)
                frame:add(erdma_f.private_data_text, pd, printable(pd:bytes()))
            end
            if avail < pdlen then
                frame:add_proto_expert_info(ef_erdma_short)
            end
        end
    end
end

function mpa_emu.dissector(tvb, _, tree)
    decode_erdma(tvb, tree)
    local fpdus = all(f_fpdu)
    if #fpdus == 0 then
        return
    end
    local stream = f_stream()
    local key = stream and stream.value
    for _, fi in ipairs(fpdus) do
        local fpdu = fi.range
        if fpdu:len() >= 2 + UNTAGGED_HEADER then
            local ulen = fpdu(0, 2):uint()
            local ctl, rctl = fpdu(2, 1):uint(), fpdu(3, 1):uint()
            local opcode = bit32.band(rctl, 0x0F)
            if ulen >= UNTAGGED_HEADER + SMBD_DATA_MIN and fpdu:len() >= 2 + ulen
                    and bit32.band(ctl, 0x80) == 0 and opcode >= 3 and opcode <= 6 then
                local qn, msn, mo = fpdu(8, 4):uint(), fpdu(12, 4):uint(), fpdu(16, 4):uint()
                local body = fpdu(2 + UNTAGGED_HEADER, ulen - UNTAGGED_HEADER)
                local whole = bit32.band(ctl, 0x40) ~= 0
                local size = body:len()
                if qn == 0 and mo == 0 then
                    local known = key ~= nil and smbd_streams[key]
                    if msn == 1 and size == SMBD_REQUEST_SIZE and whole
                            and body(4, 2):le_uint() == 0
                            and ((body(0, 2):le_uint() <= SMBD_V1
                                  and body(2, 2):le_uint() >= SMBD_V1) or smbd_port()) then
                        if key ~= nil then smbd_streams[key] = true end
                        add_negotiate_request(tree:add(mpa_emu, body), body)
                    elseif msn == 1 and size == SMBD_RESPONSE_SIZE and whole
                            and body(6, 2):le_uint() == 0 and body(0, 2):le_uint() <= SMBD_V1
                            and body(2, 2):le_uint() >= SMBD_V1 then
                        if key ~= nil then smbd_streams[key] = true end
                        add_negotiate_response(tree:add(mpa_emu, body), body)
                    elseif data_transfer(body, whole, known) then
                        add_data_transfer(tree:add(mpa_emu, body), body)
                    end
                end
            end
        end
    end
end

register_postdissector(mpa_emu)
