//! What `doctor` reads from Windows' own tools, as plain text parsers compiled
//! on every platform so that they are tested everywhere (src/setup/windows.rs
//! runs the tools).
//!
//! - Loopback isolation: a Microsoft Store game runs in an AppContainer that may
//!   not send to 127.0.0.1 unless exempt. `CheckNetIsolation LoopbackExempt -s`
//!   lists the exempt containers, one `Name:` line each (lower case).
//! - The firewall: PowerShell's `Get-NetFirewallRule` and its port and
//!   application filters, as JSON. Chosen over `netsh advfirewall firewall show
//!   rule`, whose labels ("Rule Name:", "LocalPort:") are translated on a
//!   non-English Windows: the JSON keys are ours and the values are enum names.

use serde::Deserialize;

/// The Microsoft Store Forza games that send Data Out, with their package
/// family names. FH6: several public tools name `Microsoft.ForteBaseGame`; FH5
/// and FH4: github.com/MatthewCash/forza-serial README.md; FM7: the same README
/// names the full package `microsoft.apollobasegame_1.174.4791.2_x64__8wekyb3d8bbwe`,
/// whose family name is this one. None was checked on a real installation.
pub const STORE_GAMES: [(&str, &str); 4] = [
    ("Forza Horizon 6", "Microsoft.ForteBaseGame_8wekyb3d8bbwe"),
    ("Forza Horizon 5", "Microsoft.624F8B84B80_8wekyb3d8bbwe"),
    ("Forza Horizon 4", "Microsoft.SunriseBaseGame_8wekyb3d8bbwe"),
    (
        "Forza Motorsport 7",
        "Microsoft.ApolloBaseGame_8wekyb3d8bbwe",
    ),
];

/// The command (run as administrator) that lets `family` send to 127.0.0.1.
pub fn exempt_command(family: &str) -> String {
    format!("CheckNetIsolation LoopbackExempt -a -n={family}")
}

/// The container names `CheckNetIsolation LoopbackExempt -s` lists, lower case.
/// A container Windows no longer knows is listed as `AppContainer NOT FOUND`
/// and left out.
pub fn exempt_names(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Name:"))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty() && name != "appcontainer not found")
        .collect()
}

/// True when `family` is among `exempt` (as [`exempt_names`] gives them).
pub fn is_exempt(exempt: &[String], family: &str) -> bool {
    exempt.iter().any(|n| n.eq_ignore_ascii_case(family))
}

/// The PowerShell script whose output [`firewall_rules`] reads: every enabled
/// inbound allow rule with its protocol, local ports and program, as JSON.
pub const FIREWALL_SCRIPT: &str = "\
$ErrorActionPreference = 'Stop'; \
$p = @{}; Get-NetFirewallPortFilter -All -PolicyStore ActiveStore | ForEach-Object { $p[$_.InstanceID] = $_ }; \
$a = @{}; Get-NetFirewallApplicationFilter -All -PolicyStore ActiveStore | ForEach-Object { $a[$_.InstanceID] = $_ }; \
@(Get-NetFirewallRule -Direction Inbound -Enabled True -Action Allow -PolicyStore ActiveStore | ForEach-Object { \
[pscustomobject]@{ name = [string]$_.DisplayName; profile = [string]$_.Profile; \
protocol = [string]$p[$_.Name].Protocol; local_port = (@($p[$_.Name].LocalPort) -join ','); \
program = [string]$a[$_.Name].Program } }) | ConvertTo-Json -Compress";

/// One enabled inbound allow rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FirewallRule {
    /// Its display name.
    pub name: String,
    /// `Any`, or profiles such as `Private, Public`.
    #[serde(default)]
    pub profile: String,
    /// `Any`, `UDP`, `TCP`, or a protocol number (17 is UDP).
    #[serde(default)]
    pub protocol: String,
    /// `Any`, or ports and ranges joined by commas (`5400,8000-8010`).
    #[serde(default)]
    pub local_port: String,
    /// `Any`, `System`, or an executable's path.
    #[serde(default)]
    pub program: String,
}

/// The rules in the script's output: `ConvertTo-Json` writes an array, or a
/// bare object for one rule, or nothing for none.
pub fn firewall_rules(json: &str) -> Result<Vec<FirewallRule>, String> {
    let json = json.trim().trim_start_matches('\u{feff}');
    if json.is_empty() {
        return Ok(Vec::new());
    }
    if json.starts_with('{') {
        return serde_json::from_str(json)
            .map(|rule| vec![rule])
            .map_err(|e| e.to_string());
    }
    serde_json::from_str(json).map_err(|e| e.to_string())
}

impl FirewallRule {
    /// True when the rule lets UDP datagrams to `port` reach `program` (the
    /// full path of forza-relay's executable).
    pub fn allows(&self, port: u16, program: &str) -> bool {
        let protocol = self.protocol.trim();
        let udp = protocol.is_empty()
            || protocol.eq_ignore_ascii_case("any")
            || protocol.eq_ignore_ascii_case("udp")
            || protocol == "17";
        let ports = self.local_port.trim();
        let port_ok = ports.is_empty()
            || ports.eq_ignore_ascii_case("any")
            || ports.split(',').any(|p| port_in(p.trim(), port));
        let rule_program = self.program.trim();
        let program_ok = rule_program.is_empty()
            || rule_program.eq_ignore_ascii_case("any")
            || rule_program.eq_ignore_ascii_case(program);
        udp && port_ok && program_ok
    }
}

/// True when `spec` (`5400` or `5000-5500`) includes `port`.
fn port_in(spec: &str, port: u16) -> bool {
    match spec.split_once('-') {
        Some((low, high)) => match (low.trim().parse::<u16>(), high.trim().parse::<u16>()) {
            (Ok(low), Ok(high)) => (low..=high).contains(&port),
            _ => false,
        },
        None => spec.parse::<u16>() == Ok(port),
    }
}

/// The command (run as administrator) that lets UDP reach `port`.
pub fn firewall_command(port: u16) -> String {
    format!(
        "netsh advfirewall firewall add rule name=\"forza-relay UDP {port}\" dir=in \
         action=allow protocol=UDP localport={port}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Constructed from the layout that public write-ups quote (Microsoft's
    // App Installer docs, and others), not captured on a real machine here.
    const EXEMPT_SAMPLE: &str = "\r
List Loopback Exempted AppContainers\r
\r
[1] -----------------------------------------------------------------\r
    Name: microsoft.fortebasegame_8wekyb3d8bbwe\r
    SID:  S-1-15-2-1973105767-3975693666-32999980-3747492175-1074076486-3102532000-500629349\r
\r
[2] -----------------------------------------------------------------\r
    Name: AppContainer NOT FOUND\r
    SID:  S-1-15-2-4122948482-779883646-1262402909-2466852205-2671899347\r
\r
[3] -----------------------------------------------------------------\r
    Name: microsoft.windows.authhost.sso.p_8wekyb3d8bbwe\r
    SID:  S-1-15-2-3389512215-1522416398-1262402909-2466852205-2671899347-1025455216-1153396211\r
\r
OK.\r
";

    #[test]
    fn the_exempt_list_is_read_and_compared_without_case() {
        let names = exempt_names(EXEMPT_SAMPLE);
        assert_eq!(
            names,
            [
                "microsoft.fortebasegame_8wekyb3d8bbwe",
                "microsoft.windows.authhost.sso.p_8wekyb3d8bbwe"
            ]
        );
        let (fh6, fh5) = (STORE_GAMES[0].1, STORE_GAMES[1].1);
        assert!(is_exempt(&names, fh6));
        assert!(!is_exempt(&names, fh5));
        assert_eq!(
            exempt_command(fh5),
            "CheckNetIsolation LoopbackExempt -a -n=Microsoft.624F8B84B80_8wekyb3d8bbwe"
        );
    }

    #[test]
    fn an_empty_exempt_list_has_no_names() {
        let none = "\r\nList Loopback Exempted AppContainers\r\n\r\nOK.\r\n";
        assert!(exempt_names(none).is_empty());
    }

    // Constructed in the shape FIREWALL_SCRIPT prints: the rules that Windows 11
    // creates when a user allows a program at the firewall prompt, a port rule,
    // and a TCP-only rule. Not captured on a real machine.
    const FIREWALL_SAMPLE: &str = r#"[{"name":"forza-relay.exe","profile":"Private","protocol":"UDP","local_port":"Any","program":"C:\\Users\\sam\\Downloads\\forza-relay\\forza-relay.exe"},{"name":"forza-relay.exe","profile":"Private","protocol":"TCP","local_port":"Any","program":"C:\\Users\\sam\\Downloads\\forza-relay\\forza-relay.exe"},{"name":"SimHub","profile":"Any","protocol":"Any","local_port":"Any","program":"C:\\Program Files (x86)\\SimHub\\SimHubWPF.exe"},{"name":"Forza ports","profile":"Any","protocol":"17","local_port":"5300-5310,9999","program":"Any"},{"name":"Web","profile":"Any","protocol":"TCP","local_port":"5400","program":"Any"}]"#;

    const EXE: &str = r"C:\Users\sam\Downloads\forza-relay\forza-relay.exe";

    #[test]
    fn a_rule_for_the_program_or_the_port_lets_udp_in() {
        let rules = firewall_rules(FIREWALL_SAMPLE).expect("the sample parses");
        assert_eq!(rules.len(), 5);
        let allowing = |port: u16, exe: &str| -> Vec<&str> {
            rules
                .iter()
                .filter(|r| r.allows(port, exe))
                .map(|r| r.name.as_str())
                .collect()
        };
        // The program's own UDP rule; the TCP rule and SimHub's don't count.
        assert_eq!(allowing(5400, EXE), ["forza-relay.exe"]);
        // Paths compare without case, as Windows does.
        assert_eq!(allowing(5400, &EXE.to_uppercase()), ["forza-relay.exe"]);
        // A port rule for any program, by range and by list.
        assert_eq!(allowing(5305, r"C:\other\forza-relay.exe"), ["Forza ports"]);
        assert_eq!(allowing(9999, r"C:\other\forza-relay.exe"), ["Forza ports"]);
        assert!(allowing(5400, r"C:\other\forza-relay.exe").is_empty());
    }

    #[test]
    fn one_rule_is_a_bare_object_and_none_is_empty() {
        let one =
            r#"{"name":"x","profile":"Any","protocol":"Any","local_port":"Any","program":"Any"}"#;
        let rules = firewall_rules(one).expect("one rule parses");
        assert_eq!(rules.len(), 1);
        assert!(rules[0].allows(1, "anything"));
        assert_eq!(firewall_rules("\u{feff}\r\n"), Ok(Vec::new()));
        assert!(firewall_rules("Get-NetFirewallRule : Access is denied").is_err());
    }

    #[test]
    fn the_fix_is_a_command_naming_the_port() {
        assert_eq!(
            firewall_command(5400),
            "netsh advfirewall firewall add rule name=\"forza-relay UDP 5400\" dir=in \
             action=allow protocol=UDP localport=5400"
        );
    }
}
