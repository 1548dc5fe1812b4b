# Independent reference values for tunelab.stats, computed with R.
#
# Regenerate (from the repository root):
#     Rscript tests/stats/reference/make_reference.R
# Needs: R >= 4.2 with the Debian packages r-cran-car, r-cran-jsonlite and r-cran-rstatix.
# Writes tests/stats/reference/datasets/*.csv (the data, exported from R's `datasets` package) and
# tests/stats/reference/reference.json (the values; numbers with 15 significant digits).
#
# Conventions shared with tunelab.stats:
# * group levels are sorted in C-locale order (what Python's sorted() does), so the pair
#   (group1, group2) has group1 before group2 and estimate = mean(group2) - mean(group1);
# * every table is a JSON array of row objects.

suppressPackageStartupMessages({
  library(car)
  library(jsonlite)
  library(rstatix)
})

args <- commandArgs(trailingOnly = FALSE)
script <- sub("^--file=", "", args[grep("^--file=", args)])
here <- if (length(script)) dirname(normalizePath(script)) else "tests/stats/reference"
source(file.path(here, "dunn_formula.R"))
source(file.path(here, "games_howell_formula.R"))
dir.create(file.path(here, "datasets"), showWarnings = FALSE)

c_sorted_factor <- function(x) {
  x <- as.character(x)
  factor(x, levels = sort(unique(x), method = "radix"))
}

# ---------------------------------------------------------------- datasets -----------------------
data_sets <- list(
  PlantGrowth = PlantGrowth,
  InsectSprays = InsectSprays,
  warpbreaks = warpbreaks,
  ToothGrowth = ToothGrowth
)
# Unbalanced versions (fixed rows removed) so Tukey-Kramer and Type I/II/III sums of squares differ.
data_sets$InsectSprays_unbalanced <- InsectSprays[-c(1, 2, 13, 25, 26, 27, 40), ]
data_sets$warpbreaks_unbalanced <- warpbreaks[-c(1, 2, 3, 10, 30, 41), ]
data_sets$ToothGrowth_unbalanced <- ToothGrowth[-c(1, 2, 11, 12, 13, 31, 45), ]
for (name in names(data_sets)) {
  write.csv(data_sets[[name]], file.path(here, "datasets", paste0(name, ".csv")), row.names = FALSE)
}

# ---------------------------------------------------------------- one-way analyses ---------------
oneway_reference <- function(dataset, dv, between) {
  d <- data_sets[[dataset]]
  y <- d[[dv]]
  g <- c_sorted_factor(d[[between]])
  k <- nlevels(g)
  fit <- aov(y ~ g)
  tab <- summary(fit)[[1]]
  ss_b <- tab[1, "Sum Sq"]; ss_w <- tab[2, "Sum Sq"]; df_b <- tab[1, "Df"]; df_w <- tab[2, "Df"]
  ms_w <- ss_w / df_w

  welch <- oneway.test(y ~ g, var.equal = FALSE)
  kw <- kruskal.test(y ~ g)
  lev_mean <- leveneTest(y ~ g, center = mean)
  lev_median <- leveneTest(y ~ g, center = median)
  sw <- shapiro.test(residuals(fit))

  tk <- TukeyHSD(fit, conf.level = 0.95)$g
  lev <- levels(g)
  pairs <- do.call(rbind, lapply(rownames(tk), function(r) {
    parts <- strsplit(r, "-", fixed = TRUE)[[1]]          # "group2-group1"
    data.frame(group1 = parts[2], group2 = parts[1])
  }))
  pooled <- pairwise.t.test(y, g, pool.sd = TRUE, p.adjust.method = "none")$p.value
  tukey <- data.frame(pairs, estimate = tk[, "diff"], ci_low = tk[, "lwr"], ci_high = tk[, "upr"],
                      p = mapply(function(a, b) pooled[b, a], pairs$group1, pairs$group2),
                      p_adj = tk[, "p adj"], row.names = NULL)

  gh <- games_howell_formula(y, g)
  gh_rstatix <- as.data.frame(games_howell_test(data.frame(y = y, g = g), y ~ g, detailed = TRUE))
  stopifnot(isTRUE(all.equal(gh$estimate, gh_rstatix$estimate, tolerance = 1e-12)),
            isTRUE(all.equal(gh$ci_low, gh_rstatix$conf.low, tolerance = 1e-12)),
            max(abs(gh$p_adj - gh_rstatix$p.adj)) <= 0.0005 + 1e-12)   # rstatix rounds to 3 digits
  welch_p <- mapply(function(a, b) t.test(y[g == b], y[g == a], var.equal = FALSE)$p.value,
                    gh$group1, gh$group2)
  stopifnot(isTRUE(all.equal(gh$p, unname(welch_p), tolerance = 1e-12)))

  dunn_tables <- list()
  for (method in c("none", "bonferroni", "holm", "BH")) {
    mine <- dunn_formula(y, g, method)
    theirs <- as.data.frame(dunn_test(data.frame(y = y, g = g), y ~ g, p.adjust.method = method,
                                      detailed = TRUE))
    stopifnot(identical(mine$group1, theirs$group1), identical(mine$group2, theirs$group2),
              isTRUE(all.equal(mine$estimate, theirs$estimate, tolerance = 1e-12)),
              isTRUE(all.equal(mine$statistic, theirs$statistic, tolerance = 1e-12)),
              isTRUE(all.equal(mine$p, theirs$p, tolerance = 1e-12)),
              isTRUE(all.equal(mine$p_adj, theirs$p.adj, tolerance = 1e-12)))
    dunn_tables[[method]] <- mine
  }

  summ <- do.call(rbind, lapply(lev, function(l) {
    v <- y[g == l]
    data.frame(group = l, n = length(v), mean = mean(v), sd = sd(v), median = median(v),
               iqr = IQR(v), cv = sd(v) / mean(v))
  }))

  list(
    dataset = dataset, dv = dv, between = between, levels = lev,
    anova = list(call = sprintf("summary(aov(%s ~ %s, data = %s))", dv, between, dataset),
                 ss = c(ss_b, ss_w), df = c(df_b, df_w), ms = c(ss_b / df_b, ms_w),
                 F = tab[1, "F value"], p = tab[1, "Pr(>F)"],
                 eta2 = ss_b / (ss_b + ss_w), omega2 = (ss_b - df_b * ms_w) / (ss_b + ss_w + ms_w)),
    welch = list(call = sprintf("oneway.test(%s ~ %s, data = %s, var.equal = FALSE)", dv, between, dataset),
                 F = unname(welch$statistic), df1 = unname(welch$parameter[1]),
                 df2 = unname(welch$parameter[2]), p = welch$p.value),
    kruskal = list(call = sprintf("kruskal.test(%s ~ %s, data = %s)", dv, between, dataset),
                   H = unname(kw$statistic), df = unname(kw$parameter), p = kw$p.value,
                   epsilon2 = unname(kw$statistic) / (length(y) - 1)),
    levene = list(call = sprintf("car::leveneTest(%s ~ %s, data = %s, center = mean)", dv, between, dataset),
                  F = lev_mean[1, "F value"], df1 = lev_mean[1, "Df"], df2 = lev_mean[2, "Df"],
                  p = lev_mean[1, "Pr(>F)"]),
    brown_forsythe = list(call = sprintf("car::leveneTest(%s ~ %s, data = %s, center = median)", dv, between,
                                         dataset),
                          F = lev_median[1, "F value"], df1 = lev_median[1, "Df"], df2 = lev_median[2, "Df"],
                          p = lev_median[1, "Pr(>F)"]),
    shapiro = list(call = sprintf("shapiro.test(residuals(aov(%s ~ %s, data = %s)))", dv, between, dataset),
                   W = unname(sw$statistic), p = sw$p.value, n = length(y)),
    tukey = list(call = sprintf(paste0("TukeyHSD(aov(%s ~ %s, data = %s)); p: pairwise.t.test(pool.sd = TRUE, ",
                                       "p.adjust.method = 'none')"), dv, between, dataset),
                 rows = tukey),
    games_howell = list(call = paste0("games_howell_formula() in games_howell_formula.R (ptukey/qtukey), ",
                                      "checked against rstatix::games_howell_test; p: t.test(var.equal = FALSE)"),
                        rows = gh),
    dunn = list(call = paste0("dunn_formula(y, g, method) in dunn_formula.R, identical (1e-12) to ",
                              "rstatix::dunn_test(p.adjust.method = method)"),
                rows = dunn_tables),
    group_summary = list(call = "n, mean, sd, median, IQR (type 7), sd / mean per group", rows = summ)
  )
}

oneway <- list(
  PlantGrowth = oneway_reference("PlantGrowth", "weight", "group"),
  InsectSprays = oneway_reference("InsectSprays", "count", "spray"),
  InsectSprays_unbalanced = oneway_reference("InsectSprays_unbalanced", "count", "spray"),
  warpbreaks = oneway_reference("warpbreaks", "breaks", "tension"),
  ToothGrowth = oneway_reference("ToothGrowth", "len", "supp")
)

# ---------------------------------------------------------------- factorial ANOVA ----------------
anova_rows <- function(tab) {
  tab <- as.data.frame(tab)
  source <- trimws(rownames(tab))
  keep <- source != "(Intercept)"
  source <- ifelse(source == "Residuals", "Residual", source)
  data.frame(source = source[keep], ss = tab[keep, "Sum Sq"], df = tab[keep, "Df"],
             F = tab[keep, "F value"], p = tab[keep, "Pr(>F)"], row.names = NULL)
}

factorial_reference <- function(dataset, dv, factors, interactions = TRUE) {
  d <- data_sets[[dataset]]
  for (f in factors) d[[f]] <- c_sorted_factor(d[[f]])
  rhs <- paste(factors, collapse = if (interactions) " * " else " + ")
  form <- as.formula(paste(dv, "~", rhs))
  fit <- lm(form, data = d)
  old <- options(contrasts = c("contr.sum", "contr.poly"))
  fit_sum <- lm(form, data = d)
  options(old)
  out <- list(dataset = dataset, dv = dv, factors = factors, interactions = interactions,
              type1 = list(call = sprintf("anova(lm(%s ~ %s, data = %s))", dv, rhs, dataset),
                           rows = anova_rows(anova(fit))),
              type2 = list(call = sprintf("car::Anova(lm(%s ~ %s, data = %s), type = 2)", dv, rhs, dataset),
                           rows = anova_rows(Anova(fit, type = 2))),
              type3 = list(call = sprintf(paste0("options(contrasts = c('contr.sum', 'contr.poly')); ",
                                                 "car::Anova(lm(%s ~ %s, data = %s), type = 3)"),
                                          dv, rhs, dataset),
                           rows = anova_rows(Anova(fit_sum, type = 3))))
  for (t in c("type1", "type2", "type3")) {
    rows <- out[[t]]$rows
    ss_res <- rows$ss[rows$source == "Residual"]
    out[[t]]$rows$partial_eta2 <- ifelse(rows$source == "Residual", NA, rows$ss / (rows$ss + ss_res))
  }
  out
}

factorial <- list(
  warpbreaks = factorial_reference("warpbreaks", "breaks", c("wool", "tension")),
  warpbreaks_unbalanced = factorial_reference("warpbreaks_unbalanced", "breaks", c("wool", "tension")),
  warpbreaks_unbalanced_additive = factorial_reference("warpbreaks_unbalanced", "breaks", c("wool", "tension"),
                                                       interactions = FALSE),
  ToothGrowth = factorial_reference("ToothGrowth", "len", c("supp", "dose")),
  ToothGrowth_unbalanced = factorial_reference("ToothGrowth_unbalanced", "len", c("supp", "dose"))
)

# ---------------------------------------------------------------- effect sizes -------------------
# Cohen's d with the pooled SD; Hedges' g = d (1 - 3 / (4 (n1 + n2) - 9)) (Hedges & Olkin 1985,
# eq. 5.10 approximation; also effsize::cohen.d and pingouin); CI for g:
# g -/+ qt(0.975, n1 + n2 - 2) sqrt((n1 + n2) / (n1 n2) + g^2 / (2 (n1 + n2))).
cohen_reference <- function(dataset, dv, between, group1, group2) {
  d <- data_sets[[dataset]]
  x1 <- d[[dv]][as.character(d[[between]]) == group1]
  x2 <- d[[dv]][as.character(d[[between]]) == group2]
  n1 <- length(x1); n2 <- length(x2)
  sp <- sqrt(((n1 - 1) * var(x1) + (n2 - 1) * var(x2)) / (n1 + n2 - 2))
  dd <- (mean(x2) - mean(x1)) / sp
  gg <- dd * (1 - 3 / (4 * (n1 + n2) - 9))
  half <- qt(0.975, n1 + n2 - 2) * sqrt((n1 + n2) / (n1 * n2) + gg^2 / (2 * (n1 + n2)))
  data.frame(dataset = dataset, dv = dv, between = between, group1 = group1, group2 = group2,
             d = dd, g = gg, ci_low = gg - half, ci_high = gg + half)
}
cohen <- rbind(
  cohen_reference("PlantGrowth", "weight", "group", "ctrl", "trt1"),
  cohen_reference("PlantGrowth", "weight", "group", "ctrl", "trt2"),
  cohen_reference("ToothGrowth", "len", "supp", "OJ", "VC"),
  cohen_reference("InsectSprays_unbalanced", "count", "spray", "A", "C")
)

# ---------------------------------------------------------------- TOST ---------------------------
# Two one-sided Welch t-tests of mean(level) - mean(baseline) against -/+ margin,
# margin = sesoi_pct / 100 * |mean(baseline)|.
tost_reference <- function(dataset, dv, between, level, baseline, sesoi_pct) {
  d <- data_sets[[dataset]]
  x <- d[[dv]][as.character(d[[between]]) == level]
  b <- d[[dv]][as.character(d[[between]]) == baseline]
  margin <- sesoi_pct / 100 * abs(mean(b))
  lower <- t.test(x, b, alternative = "greater", mu = -margin, var.equal = FALSE)
  upper <- t.test(x, b, alternative = "less", mu = margin, var.equal = FALSE)
  p <- max(lower$p.value, upper$p.value)
  data.frame(dataset = dataset, dv = dv, between = between, level = level, baseline = baseline,
             sesoi_pct = sesoi_pct, pct_change = 100 * (mean(x) / mean(b) - 1),
             lower_bound = -margin, upper_bound = margin,
             p_lower = lower$p.value, p_upper = upper$p.value, p = p, equivalent = p < 0.05)
}
tost <- rbind(
  tost_reference("PlantGrowth", "weight", "group", "trt1", "ctrl", 20),
  tost_reference("PlantGrowth", "weight", "group", "trt1", "ctrl", 5),
  tost_reference("PlantGrowth", "weight", "group", "trt2", "ctrl", 15),
  tost_reference("PlantGrowth", "weight", "group", "trt2", "ctrl", 30),
  tost_reference("ToothGrowth", "len", "supp", "VC", "OJ", 30),
  tost_reference("warpbreaks", "breaks", "tension", "M", "L", 40)
)

# ---------------------------------------------------------------- power --------------------------
# Two groups: power.t.test(strict = TRUE) counts both tails like statsmodels TTestIndPower.
# k > 2 groups, least favourable configuration for a largest difference delta (two means at
# -/+ delta/2, the others in the middle): between.var = var(means) = delta^2 / (2 (k - 1)).
sample_size <- function(sd, mean, pct, k) {
  delta <- abs(pct / 100 * mean)
  n <- if (k == 2) {
    power.t.test(delta = delta, sd = sd, sig.level = 0.05, power = 0.8, strict = TRUE)$n
  } else {
    power.anova.test(groups = k, between.var = delta^2 / (2 * (k - 1)), within.var = sd^2,
                     sig.level = 0.05, power = 0.8)$n
  }
  data.frame(pilot_sd = sd, baseline_mean = mean, pct_change = pct, n_groups = k, n_exact = n,
             n_needed = max(2, ceiling(n)))
}
power_n <- rbind(sample_size(10, 100, 10, 2), sample_size(5, 200, 5, 2), sample_size(4, 100, 3, 2),
                 sample_size(10, 100, 10, 3), sample_size(3, 50, 10, 3), sample_size(10, 100, 10, 5),
                 sample_size(2, 100, 1, 4))

achieved <- function(dataset, dv, between, pct) {
  d <- data_sets[[dataset]]
  g <- c_sorted_factor(d[[between]])
  k <- nlevels(g)
  sd_pooled <- sqrt(summary(aov(d[[dv]] ~ g))[[1]][2, "Mean Sq"])
  n_min <- min(table(g))
  delta <- abs(pct / 100 * mean(d[[dv]]))
  pw <- if (k == 2) {
    power.t.test(n = n_min, delta = delta, sd = sd_pooled, sig.level = 0.05, strict = TRUE)$power
  } else {
    power.anova.test(groups = k, n = n_min, between.var = delta^2 / (2 * (k - 1)),
                     within.var = sd_pooled^2, sig.level = 0.05)$power
  }
  data.frame(dataset = dataset, dv = dv, between = between, pct_change = pct, n_per_group = n_min,
             effect_size = delta / sd_pooled, power = pw)
}
power_achieved <- rbind(achieved("PlantGrowth", "weight", "group", 20),
                        achieved("ToothGrowth", "len", "supp", 20),
                        achieved("InsectSprays_unbalanced", "count", "spray", 50))

# ---------------------------------------------------------------- multiplicity -------------------
p_raw <- c(0.01, 0.04, 0.03, 0.2, 0.0001, 0.049, 0.5, 0.012)
multiplicity <- list(p = p_raw,
                     holm = p.adjust(p_raw, "holm"), bonferroni = p.adjust(p_raw, "bonferroni"),
                     fdr_bh = p.adjust(p_raw, "BH"))

# ---------------------------------------------------------------- Lenth's PSE --------------------
# Montgomery, Design and Analysis of Experiments (8th ed.), Example 6.2: filtration rate of a
# chemical, unreplicated 2^4 (A temperature, B pressure, C formaldehyde concentration, D stirring
# rate), runs in standard order. Montgomery's Table 6.11 effect estimates are
# A 21.625, B 3.125, C 9.875, D 14.625, AB 0.125, AC -18.125, AD 16.625, BC 2.375, BD -0.375,
# CD -1.125, ABC 1.875, ABD 4.125, ACD -1.625, BCD -2.625, ABCD 1.375; the active effects
# are A, C, D, AC and AD.
filtration <- expand.grid(A = c(-1, 1), B = c(-1, 1), C = c(-1, 1), D = c(-1, 1))
filtration$rate <- c(45, 71, 48, 65, 68, 60, 80, 65, 43, 100, 45, 104, 75, 86, 70, 96)
write.csv(filtration, file.path(here, "datasets", "filtration_rate.csv"), row.names = FALSE)
fit <- lm(rate ~ A * B * C * D, data = filtration)
effect <- 2 * coef(fit)[-1]
m <- length(effect)
s0 <- 1.5 * median(abs(effect))
pse <- 1.5 * median(abs(effect)[abs(effect) < 2.5 * s0])
me <- qt(0.975, m / 3) * pse
sme <- qt((1 + 0.95^(1 / m)) / 2, m / 3) * pse
lenth <- list(source = "Montgomery (2013) Design and Analysis of Experiments, 8th ed., Example 6.2",
              call = "2 * coef(lm(rate ~ A * B * C * D)); Lenth (1989) s0, PSE, ME, SME by formula",
              rows = data.frame(term = names(effect), effect = unname(effect), pse = pse,
                                t = unname(effect) / pse, significant_me = abs(unname(effect)) > me,
                                significant_sme = abs(unname(effect)) > sme),
              s0 = s0, pse = pse, me = me, sme = sme, d = m / 3)

# ---------------------------------------------------------------- write --------------------------
reference <- list(
  generated_by = "tests/stats/reference/make_reference.R",
  r_version = R.version.string,
  packages = list(car = as.character(packageVersion("car")),
                  rstatix = as.character(packageVersion("rstatix")),
                  jsonlite = as.character(packageVersion("jsonlite"))),
  oneway = oneway, factorial = factorial, cohens_d = cohen, tost = tost,
  replicates_needed = power_n, achieved_power = power_achieved, multiplicity = multiplicity,
  lenth = lenth
)
write_json(reference, file.path(here, "reference.json"), digits = I(15), auto_unbox = TRUE,
           pretty = TRUE, na = "null")
cat("wrote", file.path(here, "reference.json"), "\n")
