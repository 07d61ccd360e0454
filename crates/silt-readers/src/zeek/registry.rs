//! The Zeek field types of known logs, for the JSON reader (Zeek JSON carries no type header).
//!
//! The table was generated once from the `#fields`/`#types` headers of every TSV log in the
//! shared corpus (Zeek 6.2 zed-sample-data, Bro 2.x logs from VAST, Zeek btest baselines) merged
//! with the field lists of Zeek's standard logs (base and common policy scripts of Zeek 5-7,
//! plus a few widely deployed packages: hassh, ja3, CIF intel). Where versions disagree the
//! modern Zeek type name wins (`set[string]` over Bro 2.x `table[string]`); both map to the same
//! Arrow type. Fields only older versions log (Bro 2.x `ssl.issuer_subject`, `x509.id`, ...) are
//! kept after the modern ones. It is maintained by hand from now on: a test
//! (`tests/zeek_registry.rs`) checks that every corpus TSV header agrees with it.
//!
//! Lookup order for a JSON field `f` of log `p`: the entry of `p`, then [`global_type`] (names
//! whose type is the same in every log here, so that renamed logs such as `conn_long` or
//! `weird.123.190` still get Zeek types), then value inference in the JSON reader.
//!
//! This module touches nothing; it is data plus two lookups.

use std::collections::HashMap;
use std::sync::OnceLock;

/// `(log path, "field:type field:type ...")` in Zeek's column order.
pub const LOGS: &[(&str, &str)] = &[
    (
        "conn",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         proto:enum service:string duration:interval orig_bytes:count resp_bytes:count \
         conn_state:string local_orig:bool local_resp:bool missed_bytes:count history:string \
         orig_pkts:count orig_ip_bytes:count resp_pkts:count resp_ip_bytes:count \
         tunnel_parents:set[string] ip_proto:count orig_l2_addr:string resp_l2_addr:string \
         vlan:int inner_vlan:int speculative_service:string community_id:string",
    ),
    (
        "dns",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         proto:enum trans_id:count rtt:interval query:string qclass:count qclass_name:string \
         qtype:count qtype_name:string rcode:count rcode_name:string AA:bool TC:bool RD:bool \
         RA:bool Z:count answers:vector[string] TTLs:vector[interval] rejected:bool \
         auth:set[string] addl:set[string] original_query:string opcode:count \
         opcode_name:string",
    ),
    (
        "http",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         trans_depth:count method:string host:string uri:string referrer:string \
         version:string user_agent:string origin:string request_body_len:count \
         response_body_len:count status_code:count status_msg:string info_code:count \
         info_msg:string tags:set[enum] username:string password:string proxied:set[string] \
         orig_fuids:vector[string] orig_filenames:vector[string] \
         orig_mime_types:vector[string] resp_fuids:vector[string] \
         resp_filenames:vector[string] resp_mime_types:vector[string] \
         client_header_names:vector[string] server_header_names:vector[string] \
         cookie_vars:vector[string] uri_vars:vector[string] filename:string mime_type:string \
         md5:string extraction_file:file",
    ),
    (
        "files",
        "ts:time fuid:string uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr \
         id.resp_p:port source:string depth:count analyzers:set[string] mime_type:string \
         filename:string duration:interval local_orig:bool is_orig:bool seen_bytes:count \
         total_bytes:count missing_bytes:count overflow_bytes:count timedout:bool \
         parent_fuid:string md5:string sha1:string sha256:string extracted:string \
         extracted_cutoff:bool extracted_size:count entropy:double tx_hosts:set[addr] \
         rx_hosts:set[addr] conn_uids:set[string]",
    ),
    (
        "ssl",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         version:string cipher:string curve:string server_name:string resumed:bool \
         last_alert:string next_protocol:string established:bool ssl_history:string \
         cert_chain_fps:vector[string] client_cert_chain_fps:vector[string] \
         cert_chain_fuids:vector[string] client_cert_chain_fuids:vector[string] \
         subject:string issuer:string client_subject:string client_issuer:string \
         sni_matches_cert:bool validation_status:string ocsp_status:string \
         valid_ct_logs:count valid_ct_operators:count valid_ct_operators_list:set[string] \
         notary.first_seen:count notary.times_seen:count notary.valid:bool session_id:string \
         ja3:string ja3s:string issuer_subject:string not_valid_before:time \
         not_valid_after:time client_issuer_subject:string server_version:count \
         client_version:count client_ciphers:vector[count] ssl_client_exts:vector[count] \
         ssl_server_exts:vector[count] ticket_lifetime_hint:count dh_param_size:count \
         point_formats:vector[count] client_curves:vector[count] orig_alpn:vector[string] \
         client_supported_versions:vector[count] server_supported_version:count \
         psk_key_exchange_modes:vector[count] client_key_share_groups:vector[count] \
         server_key_share_group:count client_comp_methods:vector[count] sigalgs:vector[count] \
         hashalgs:vector[count] ech_kdf_id:count ech_aead_id:count",
    ),
    (
        "x509",
        "ts:time fingerprint:string id:string certificate.version:count \
         certificate.serial:string certificate.subject:string certificate.issuer:string \
         certificate.not_valid_before:time certificate.not_valid_after:time \
         certificate.key_alg:string certificate.sig_alg:string certificate.key_type:string \
         certificate.key_length:count certificate.exponent:string certificate.curve:string \
         san.dns:vector[string] san.uri:vector[string] san.email:vector[string] \
         san.ip:vector[addr] basic_constraints.ca:bool basic_constraints.path_len:count \
         host_cert:bool client_cert:bool cert:string",
    ),
    (
        "notice",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         fuid:string file_mime_type:string file_desc:string proto:enum note:enum msg:string \
         sub:string src:addr dst:addr p:port n:count peer_name:string peer_descr:string \
         actions:set[enum] email_dest:set[string] suppress_for:interval dropped:bool \
         remote_location.country_code:string remote_location.region:string \
         remote_location.city:string remote_location.latitude:double \
         remote_location.longitude:double",
    ),
    (
        "weird",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         name:string addl:string notice:bool peer:string source:string",
    ),
    (
        "dhcp",
        "ts:time uids:set[string] uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr \
         id.resp_p:port client_addr:addr server_addr:addr client_port:port server_port:port \
         mac:string host_name:string client_fqdn:string domain:string requested_addr:addr \
         assigned_addr:addr lease_time:interval client_message:string server_message:string \
         msg_types:vector[string] duration:interval client_chaddr:string \
         msg_orig:vector[addr] client_software:string server_software:string \
         circuit_id:string agent_remote_id:string subscriber_id:string assigned_ip:addr \
         trans_id:count",
    ),
    (
        "smtp",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         trans_depth:count helo:string mailfrom:string rcptto:set[string] date:string \
         from:string to:set[string] cc:set[string] reply_to:string msg_id:string \
         in_reply_to:string subject:string x_originating_ip:addr first_received:string \
         second_received:string last_reply:string path:vector[addr] user_agent:string \
         tls:bool fuids:vector[string] is_webmail:bool",
    ),
    (
        "ssh",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         version:count auth_success:bool auth_attempts:count direction:enum client:string \
         server:string cipher_alg:string mac_alg:string compression_alg:string kex_alg:string \
         host_key_alg:string host_key:string remote_location.country_code:string \
         remote_location.region:string remote_location.city:string \
         remote_location.latitude:double remote_location.longitude:double hasshVersion:string \
         hassh:string hasshServer:string cshka:string hasshAlgorithms:string sshka:string \
         hasshServerAlgorithms:string",
    ),
    (
        "ftp",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         user:string password:string command:string arg:string mime_type:string \
         file_size:count reply_code:count reply_msg:string data_channel.passive:bool \
         data_channel.orig_h:addr data_channel.resp_h:addr data_channel.resp_p:port \
         fuid:string",
    ),
    (
        "kerberos",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         request_type:string client:string service:string success:bool error_msg:string \
         from:time till:time cipher:string forwardable:bool renewable:bool \
         client_cert_subject:string client_cert_fuid:string server_cert_subject:string \
         server_cert_fuid:string",
    ),
    (
        "ntlm",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         username:string hostname:string domainname:string server_nb_computer_name:string \
         server_dns_computer_name:string server_tree_name:string success:bool",
    ),
    (
        "smb_files",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         fuid:string action:enum path:string name:string size:count prev_name:string \
         times.modified:time times.accessed:time times.created:time times.changed:time \
         data_offset_req:count data_len_req:count data_len_rsp:count",
    ),
    (
        "smb_mapping",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         path:string service:string native_file_system:string share_type:string",
    ),
    (
        "smb_cmd",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         command:string sub_command:string argument:string status:string rtt:interval \
         version:string username:string tree:string tree_service:string \
         referenced_file.ts:time referenced_file.uid:string referenced_file.id.orig_h:addr \
         referenced_file.id.orig_p:port referenced_file.id.resp_h:addr \
         referenced_file.id.resp_p:port referenced_file.fuid:string \
         referenced_file.action:enum referenced_file.path:string referenced_file.name:string \
         referenced_file.size:count referenced_file.prev_name:string \
         referenced_file.times.modified:time referenced_file.times.accessed:time \
         referenced_file.times.created:time referenced_file.times.changed:time",
    ),
    (
        "dce_rpc",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         rtt:interval named_pipe:string endpoint:string operation:string",
    ),
    (
        "rdp",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         cookie:string result:string security_protocol:string client_channels:vector[string] \
         keyboard_layout:string client_build:string client_name:string \
         client_dig_product_id:string desktop_width:count desktop_height:count \
         requested_color_depth:string cert_type:string cert_count:count cert_permanent:bool \
         encryption_level:string encryption_method:string",
    ),
    (
        "sip",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         trans_depth:count method:string uri:string date:string request_from:string \
         request_to:string response_from:string response_to:string reply_to:string \
         call_id:string seq:string subject:string request_path:vector[string] \
         response_path:vector[string] user_agent:string status_code:count status_msg:string \
         warning:string request_body_len:count response_body_len:count content_type:string",
    ),
    (
        "snmp",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         duration:interval version:string community:string get_requests:count \
         get_bulk_requests:count get_responses:count set_requests:count display_string:string \
         up_since:time",
    ),
    (
        "software",
        "ts:time host:addr host_p:port software_type:enum name:string version.major:count \
         version.minor:count version.minor2:count version.minor3:count version.addl:string \
         unparsed_version:string url:string",
    ),
    (
        "tunnel",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         tunnel_type:enum action:enum",
    ),
    (
        "pe",
        "ts:time id:string fuid:string machine:string compile_ts:time os:string \
         subsystem:string is_exe:bool is_64bit:bool uses_aslr:bool uses_dep:bool \
         uses_code_integrity:bool uses_seh:bool has_import_table:bool has_export_table:bool \
         has_cert_table:bool has_debug_data:bool section_names:vector[string]",
    ),
    (
        "ntp",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         version:count mode:count stratum:count poll:interval precision:interval \
         root_delay:interval root_disp:interval ref_id:string ref_time:time org_time:time \
         rec_time:time xmt_time:time num_exts:count",
    ),
    (
        "stats",
        "ts:time peer:string mem:count pkts_proc:count bytes_recv:count pkts_dropped:count \
         pkts_link:count pkt_lag:interval pkts_filtered:count events_proc:count \
         events_queued:count active_tcp_conns:count active_udp_conns:count \
         active_icmp_conns:count tcp_conns:count udp_conns:count icmp_conns:count \
         timers:count active_timers:count files:count active_files:count dns_requests:count \
         active_dns_requests:count reassem_tcp_size:count reassem_file_size:count \
         reassem_frag_size:count reassem_unknown_size:count",
    ),
    (
        "capture_loss",
        "ts:time ts_delta:interval peer:string gaps:count acks:count percent_lost:double",
    ),
    (
        "analyzer",
        "ts:time cause:string analyzer_kind:string analyzer_name:string uid:string \
         fuid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         failure_reason:string failure_data:string proto:enum packet_segment:string",
    ),
    (
        "dpd",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         proto:enum analyzer:string failure_reason:string packet_segment:string",
    ),
    ("known_hosts", "ts:time host:addr"),
    (
        "known_services",
        "ts:time host:addr port_num:port port_proto:enum service:set[string]",
    ),
    (
        "known_certs",
        "ts:time host:addr port_num:port subject:string issuer_subject:string serial:string",
    ),
    ("known_modbus", "ts:time host:addr device_type:enum"),
    (
        "modbus",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         tid:count unit:count func:string pdu_type:string exception:string",
    ),
    (
        "rfb",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         client_major_version:string client_minor_version:string server_major_version:string \
         server_minor_version:string authentication_method:string auth:bool share_flag:bool \
         desktop_name:string width:count height:count",
    ),
    (
        "irc",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         nick:string user:string command:string value:string addl:string dcc_file_name:string \
         dcc_file_size:count dcc_mime_type:string fuid:string",
    ),
    (
        "radius",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         username:string mac:string framed_addr:addr tunnel_client:string connect_info:string \
         reply_msg:string result:string ttl:interval",
    ),
    (
        "syslog",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         proto:enum facility:string severity:string message:string",
    ),
    (
        "dnp3",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         fc_request:string fc_reply:string iin:count",
    ),
    (
        "mysql",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         cmd:string arg:string success:bool rows:count response:string",
    ),
    (
        "socks",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         version:count user:string password:string status:string request.host:addr \
         request.name:string request_p:port bound.host:addr bound.name:string bound_p:port",
    ),
    (
        "reporter",
        "ts:time level:enum message:string location:string",
    ),
    (
        "signatures",
        "ts:time uid:string src_addr:addr src_port:port dst_addr:addr dst_port:port note:enum \
         sig_id:string event_msg:string sub_msg:string sig_count:count host_count:count",
    ),
    ("traceroute", "ts:time src:addr dst:addr proto:string"),
    ("cluster", "ts:time node:string message:string"),
    (
        "broker",
        "ts:time ty:enum ev:string peer.address:string peer.bound_port:port message:string",
    ),
    (
        "config",
        "ts:time id:string old_value:string new_value:string location:string",
    ),
    (
        "netcontrol",
        "ts:time rule_id:string category:enum cmd:string state:enum action:string target:enum \
         entity_type:string entity:string mod:string msg:string priority:int expire:interval \
         location:string plugin:string",
    ),
    ("weird_stats", "ts:time name:string num_seen:count"),
    (
        "unknown_protocols",
        "ts:time analyzer:string protocol_id:string first_bytes:string \
         analyzer_history:vector[string]",
    ),
    (
        "mqtt_connect",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         proto_name:string proto_version:string client_id:string connect_status:string \
         will_topic:string will_payload:string",
    ),
    (
        "mqtt_publish",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         from_client:bool retain:bool qos:string status:string topic:string payload:string \
         payload_len:count",
    ),
    (
        "mqtt_subscribe",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         action:enum topics:vector[string] qos_levels:vector[count] granted_qos_level:count \
         ack:bool",
    ),
    (
        "websocket",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         host:string uri:string user_agent:string subprotocol:string \
         client_protocols:vector[string] server_extensions:vector[string] \
         client_extensions:vector[string]",
    ),
    (
        "ocsp",
        "ts:time id:string hashAlgorithm:string issuerNameHash:string issuerKeyHash:string \
         serialNumber:string certStatus:string revoketime:time revokereason:string \
         thisUpdate:time nextUpdate:time",
    ),
    (
        "telemetry",
        "ts:time peer:string metric_type:string prefix:string name:string unit:string \
         labels:vector[string] label_values:vector[string] value:double",
    ),
    ("loaded_scripts", "name:string"),
    (
        "packet_filter",
        "ts:time node:string filter:string init:bool success:bool failure_reason:string",
    ),
    (
        "intel",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         seen.indicator:string seen.indicator_type:enum seen.where:enum seen.node:string \
         matched:set[enum] sources:set[string] fuid:string file_mime_type:string \
         file_desc:string cif.tags:string cif.confidence:double cif.source:string \
         cif.description:string cif.firstseen:string cif.lastseen:string",
    ),
    (
        "ldap",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         message_id:int version:int opcode:string result:string diagnostic_message:string \
         object:string argument:string",
    ),
    (
        "ldap_search",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         message_id:int scope:string deref_aliases:string base_object:string \
         result_count:count result:string diagnostic_message:string filter:string \
         attributes:vector[string]",
    ),
    (
        "quic",
        "ts:time uid:string id.orig_h:addr id.orig_p:port id.resp_h:addr id.resp_p:port \
         version:string client_initial_dcid:string client_scid:string server_scid:string \
         server_name:string client_protocol:string history:string",
    ),
];

/// Logs that are written with another log's record type: `(alias, log)`.
/// `conn_long` is Corelight's/zeek-long-connections' periodic conn record.
const ALIASES: &[(&str, &str)] = &[("conn_long", "conn"), ("notice_alarm", "notice")];

/// Fields every Zeek JSON stream may carry regardless of the log: the JSON writer's
/// `_write_ts` (kept as a time column) and Corelight's `_system_name`.
const EXTRA: &[(&str, &str)] = &[("_write_ts", "time"), ("_system_name", "string")];

struct Registry {
    /// path -> field -> (position in the log, Zeek type)
    logs: HashMap<&'static str, HashMap<&'static str, (usize, &'static str)>>,
    /// field -> type, for names with one Arrow type across all logs.
    global: HashMap<&'static str, &'static str>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let mut logs = HashMap::new();
        let mut all: HashMap<&'static str, Vec<&'static str>> = HashMap::new();
        for (path, spec) in LOGS {
            let mut fields = HashMap::new();
            for (i, item) in spec.split_whitespace().enumerate() {
                let (name, ty) = item
                    .split_once(':')
                    .expect("registry entries are name:type");
                fields.insert(name, (i, ty));
                all.entry(name).or_default().push(ty);
            }
            logs.insert(*path, fields);
        }
        for (alias, log) in ALIASES {
            let fields = logs[log].clone();
            logs.insert(*alias, fields);
        }
        let mut global = HashMap::new();
        for (name, types) in all {
            let first = super::types::ZType::parse(types[0]).arrow();
            if types
                .iter()
                .all(|t| super::types::ZType::parse(t).arrow() == first)
            {
                global.insert(name, types[0]);
            }
        }
        for (name, ty) in EXTRA {
            global.insert(*name, *ty);
        }
        Registry { logs, global }
    })
}

/// Whether `path` is a log the registry knows.
pub fn knows_log(path: &str) -> bool {
    registry().logs.contains_key(path)
}

/// The Zeek type and column position of field `field` in log `path`.
pub fn log_field(path: &str, field: &str) -> Option<(usize, &'static str)> {
    registry().logs.get(path)?.get(field).copied()
}

/// The Zeek type of `field` when every known log that has it agrees on its Arrow type.
pub fn global_type(field: &str) -> Option<&'static str> {
    registry().global.get(field).copied()
}

/// The fields of a known log, in order, as `(name, type)`.
pub fn log_fields(path: &str) -> Option<Vec<(&'static str, &'static str)>> {
    let path = ALIASES
        .iter()
        .find(|(a, _)| *a == path)
        .map_or(path, |(_, l)| *l);
    let spec = LOGS.iter().find(|(p, _)| *p == path)?.1;
    Some(
        spec.split_whitespace()
            .filter_map(|i| i.split_once(':'))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(log_field("conn", "id.orig_p").map(|x| x.1), Some("port"));
        assert_eq!(log_field("conn", "ts"), Some((0, "time")));
        assert_eq!(global_type("trans_id"), Some("count"));
        assert_eq!(global_type("_write_ts"), Some("time"));
        // `version` is a string in ssl, a count in ssh: no global type.
        assert_eq!(global_type("version"), None);
        assert!(knows_log("x509"));
        assert!(!knows_log("corelight_metrics_cpu"));
        let mut seen = std::collections::HashSet::new();
        for (p, _) in LOGS {
            assert!(seen.insert(p), "log {p} listed twice");
            let f = log_fields(p).unwrap();
            let names: std::collections::HashSet<_> = f.iter().map(|x| x.0).collect();
            assert_eq!(names.len(), f.len(), "duplicate field in {p}");
        }
    }
}
