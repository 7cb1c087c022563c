//! Drawing one frame of `binky top`: a header, the table of worlds and services, the log
//! pane, the last command's outcome and the keys. The sixteen standard colours and box-drawing
//! frames only, so it reads the same in any UTF-8 terminal over ssh (and without colours:
//! every state is a word).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line as TextLine, Span, Text};
use ratatui::widgets::{Block, BorderType, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use super::app::{App, Pane};
use super::model::{Line, Target};
use super::text;
use crate::view::UsageView;

/// The keys, as the footer and the help list them.
pub(super) const KEYS: &[(&str, &str)] = &[
    (
        "up/down, j/k",
        "select a world or a service (PgUp/PgDn, g/G: page, first, last)",
    ),
    (
        "enter, tab",
        "open or close the log pane: a service's output, a world's events",
    ),
    ("u", "binky up the selected world"),
    ("d", "binky down the selected world"),
    ("r", "binky reload the selected world"),
    ("esc", "close the log pane"),
    ("?", "this help"),
    ("q, ctrl-c", "quit"),
];

/// The columns, as the help explains them.
pub(super) const COLUMNS: &[(&str, &str)] = &[
    ("NAME", "project, its worlds, each world's services (replicas: api.1)"),
    ("STATE", "as binky status: ready, starting, failed, queued, cooled, unhealthy, …"),
    ("CPU", "percent of one core over the last few seconds"),
    ("MEM", "memory in use (a world's: its own processes together)"),
    ("PORT", "the service's ports"),
    ("PID", "the service's process"),
    ("RST", "restarts since the world came up"),
    ("INFO", "a world: why it waits or fails, else age and worktree; a service: its URL, or how it ended"),
];

fn state_style(state: &str) -> Style {
    let color = match state {
        "ready" | "running" | "exited" | "idle" => Color::Green,
        "failed" | "unhealthy" => Color::Red,
        "stopped" | "pending" => Color::DarkGray,
        _ => Color::Yellow,
    };
    let style = Style::new().fg(color);
    if matches!(state, "failed" | "unhealthy") {
        style.add_modifier(Modifier::BOLD)
    } else {
        style
    }
}

/// Draw the whole screen.
pub(super) fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    let message_height = match &app.message {
        Some((_, m)) => {
            let width = area.width.max(1) as usize;
            (m.chars().count().div_ceil(width)).clamp(1, 3) as u16
        }
        None => 0,
    };
    let pane_height = if app.pane.is_some() {
        (area.height.saturating_sub(2 + message_height)) / 2
    } else {
        0
    };
    let [header, table, pane, message, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(pane_height),
        Constraint::Length(message_height),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(app)), header);
    draw_table(frame, app, table);
    if let Some(p) = &app.pane {
        draw_pane(frame, p, pane);
    }
    if let Some((ok, m)) = &app.message {
        let style = if *ok {
            Style::new()
        } else {
            Style::new().fg(Color::Red)
        };
        frame.render_widget(
            Paragraph::new(m.as_str())
                .style(style)
                .wrap(Wrap { trim: false }),
            message,
        );
    }
    let keys = "j/k select · enter logs · u up · d down · r reload · ? help · q quit";
    frame.render_widget(
        Paragraph::new(keys).style(Style::new().add_modifier(Modifier::REVERSED)),
        footer,
    );
    if app.help {
        draw_help(frame, area);
    }
}

fn header_line(app: &App) -> TextLine<'static> {
    let b = &app.board;
    let mut spans = vec![Span::styled(
        "binky top",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let worlds = if b.worlds == 1 { "world" } else { "worlds" };
    spans.push(Span::raw(format!(" · {} {worlds}", b.worlds)));
    for (i, (state, n)) in b.counts.iter().enumerate() {
        spans.push(Span::raw(if i == 0 { ": " } else { ", " }));
        spans.push(Span::styled(format!("{n} {state}"), state_style(state)));
    }
    spans.push(Span::raw(match app.daemon {
        Some(d) => format!(
            " · daemon pid {} up {}",
            d.pid,
            text::age(d.uptime_secs as i64 * 1000)
        ),
        None => " · daemon not running (u starts it)".to_owned(),
    }));
    if app.running > 0 {
        spans.push(Span::raw(format!(" · {} command(s) running", app.running)));
    }
    TextLine::from(spans)
}

fn usage_cells(u: Option<UsageView>) -> (String, String) {
    match u {
        Some(u) => (format!("{:.0}%", u.cpu_percent), text::mem(u.memory_bytes)),
        None => (String::new(), String::new()),
    }
}

fn draw_table(frame: &mut Frame, app: &mut App, area: Rect) {
    // Narrow terminals lose PID and RST first.
    let wide = area.width >= 100;
    let (widths, heads) = columns(name_width(&app.board.lines), wide);
    let rows = app.board.lines.iter().map(|l| row(l, wide, heads.len()));
    let header = Row::new(heads.iter().map(|h| Cell::from(*h)))
        .style(Style::new().add_modifier(Modifier::BOLD).fg(Color::Cyan));
    let empty = app.board.lines.is_empty();
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol(">");
    let mut state = TableState::default().with_selected((!empty).then_some(app.selected));
    // Rows the table shows: its height less the header.
    app.page = area.height.saturating_sub(1) as usize;
    frame.render_stateful_widget(table, area, &mut state);
    if empty {
        let msg = "no worlds yet: `binky up NAME` in a repository with a binky.toml makes one";
        let mut below = area;
        below.y += 2.min(area.height);
        below.height = area.height.saturating_sub(2);
        frame.render_widget(Paragraph::new(msg), below);
    }
}

/// The NAME column's width: the longest name as indented in the table, within 8 to 36.
fn name_width(lines: &[Line]) -> u16 {
    lines
        .iter()
        .map(|l| match l {
            Line::Project { name, .. } => name.chars().count(),
            Line::World(w) => 2 + w.target.world.chars().count(),
            Line::Service(s) => {
                4 + s.target.service.as_deref().unwrap_or("").chars().count()
                    + if s.shared { 9 } else { 0 }
            }
        })
        .max()
        .unwrap_or(4)
        .clamp(8, 36) as u16
}

/// The table's column widths and headings; PID and RST only when `wide`.
fn columns(name_width: u16, wide: bool) -> (Vec<Constraint>, Vec<&'static str>) {
    let mut widths = vec![
        Constraint::Length(name_width),
        Constraint::Length(12),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(14),
    ];
    let mut heads = vec!["NAME", "STATE", "CPU", "MEM", "PORT"];
    if wide {
        widths.extend([Constraint::Length(8), Constraint::Length(3)]);
        heads.extend(["PID", "RST"]);
    }
    widths.push(Constraint::Fill(1));
    heads.push("INFO");
    (widths, heads)
}

/// One line of the table (a project, a world or a service) as a row of `columns` cells.
fn row(l: &Line, wide: bool, columns: usize) -> Row<'static> {
    let dim = Style::new().fg(Color::DarkGray);
    let mut cells: Vec<Cell> = Vec::with_capacity(columns);
    let info = match l {
        Line::Project { name, repo } => {
            cells.push(Cell::from(Span::styled(
                name.clone(),
                Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            )));
            cells.extend((1..columns - 1).map(|_| Cell::from("")));
            Cell::from(Span::styled(repo.display().to_string(), dim))
        }
        Line::World(w) => {
            let (cpu, mem) = usage_cells(w.usage);
            cells.push(Cell::from(Span::styled(
                format!("  {}", w.target.world),
                Style::new().add_modifier(Modifier::BOLD),
            )));
            cells.push(Cell::from(Span::styled(
                w.state.clone(),
                state_style(&w.state),
            )));
            cells.extend([cpu, mem, String::new()].map(Cell::from));
            if wide {
                cells.push(Cell::from(""));
                cells.push(Cell::from(if w.restarts > 0 {
                    w.restarts.to_string()
                } else {
                    String::new()
                }));
            }
            if w.attention {
                Cell::from(Span::styled(w.info.clone(), Style::new().fg(Color::Yellow)))
            } else {
                Cell::from(Span::styled(w.info.clone(), dim))
            }
        }
        Line::Service(s) => {
            let (cpu, mem) = usage_cells(s.usage);
            let name = s.target.service.as_deref().unwrap_or("");
            cells.push(Cell::from(if s.shared {
                format!("    {name} (shared)")
            } else {
                format!("    {name}")
            }));
            cells.push(Cell::from(Span::styled(
                s.state.clone(),
                state_style(&s.state),
            )));
            cells.extend([cpu, mem, s.ports.clone()].map(Cell::from));
            if wide {
                cells.push(Cell::from(s.pid.map(|p| p.to_string()).unwrap_or_default()));
                cells.push(Cell::from(if s.restarts > 0 {
                    s.restarts.to_string()
                } else {
                    String::new()
                }));
            }
            Cell::from(s.info.clone())
        }
    };
    cells.push(info);
    Row::new(cells)
}

fn pane_title(target: &Target, what: &str) -> String {
    match &target.service {
        Some(s) => format!(" {s} of {}/{} — {what} ", target.project, target.world),
        None => format!(" {}/{} — {what} ", target.project, target.world),
    }
}

fn draw_pane(frame: &mut Frame, pane: &Pane, area: Rect) {
    let inner_height = area.height.saturating_sub(2) as usize;
    let (title, lines): (String, Vec<TextLine>) = match pane {
        Pane::Log { target, tail } => {
            let title = pane_title(target, &tail.path().display().to_string());
            let lines = if tail.lines.is_empty() {
                vec![TextLine::styled(
                    "(no output yet)",
                    Style::new().fg(Color::DarkGray),
                )]
            } else {
                let skip = tail.lines.len().saturating_sub(inner_height);
                tail.lines
                    .iter()
                    .skip(skip)
                    .map(|l| TextLine::raw(l.as_str()))
                    .collect()
            };
            (title, lines)
        }
        Pane::Events { target, lines, .. } => {
            let title = pane_title(target, "events (select a service for its output)");
            let skip = lines.len().saturating_sub(inner_height);
            (
                title,
                lines
                    .iter()
                    .skip(skip)
                    .map(|l| TextLine::raw(l.as_str()))
                    .collect(),
            )
        }
        Pane::Nothing { target, why } => (
            pane_title(target, "no log"),
            vec![TextLine::raw(why.as_str())],
        ),
    };
    let block = Block::bordered()
        .border_type(BorderType::Plain)
        .title(title);
    frame.render_widget(Paragraph::new(Text::from(lines)).block(block), area);
}

fn draw_help(frame: &mut Frame, area: Rect) {
    let mut lines: Vec<TextLine> = vec![TextLine::styled(
        "keys",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    lines.extend(
        KEYS.iter()
            .map(|(k, what)| TextLine::raw(format!("  {k:<14} {what}"))),
    );
    lines.push(TextLine::raw(""));
    lines.push(TextLine::styled(
        "columns",
        Style::new().add_modifier(Modifier::BOLD),
    ));
    lines.extend(
        COLUMNS
            .iter()
            .map(|(k, what)| TextLine::raw(format!("  {k:<14} {what}"))),
    );
    lines.push(TextLine::raw(""));
    lines.push(TextLine::raw(
        "u, d and r run `binky up|down|reload NAME --no-wait` for the selected line's world.",
    ));
    lines.push(TextLine::raw("Any key closes this help."));
    let width = area.width.saturating_sub(4).min(110);
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(Text::from(lines))
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" binky top: help ")),
        popup,
    );
}
